"""A simulated cluster: tasks (hosts) with devices from the hardware catalog, host links, NICs
and a fabric, on one SimPy clock.

    c = Cluster(fabric="switch")
    c.add_task("ps", 0, cpu="xeon_e5_2630v3_ps", nic="eth_10g")
    c.add_task("worker", 0, gpu=("k40", 1), cpu="xeon_e5_2680v3_2s", nic="eth_10g")
    sess = SimSession(c)              # then build and run graphs placed on /job:worker/task:0/gpu:0

Device names are TensorFlow's (``/job:worker/replica:0/task:0/device:gpu:0``), so device scopes
and ``replica_device_setter`` place ops on simulated devices exactly as on real ones.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

import simpy

from hetbed.devices.catalog import HostSpec, LinkSpec, load_device, load_host, load_link
from hetbed.devices.costmodel import CostModel, Roofline, perf_from_spec
from hetbed.devices.simulated import HostCores, SimulatedDevice
from hetbed.runtime.shapes import output_shapes

from .clock import SimClock, as_clock
from .network import Network
from .topology import Nic, SwitchFabric, TwoLevelFabric


@dataclass
class _TaskSpec:
    host: str
    nic: Any
    devices: list[tuple[str, str, int]] = field(default_factory=list)  # (kind, catalog key, n)
    peer_link: str | None = None
    machine: str | None = None  # the physical host whose cores it shares with its other tasks
    cpu: Any = None
    topology: HostSpec | None = None  # the catalog host topology it is built as, if any


def _link_spec(link: Any) -> LinkSpec:
    """A task's NIC as a catalog link: a LinkSpec, or the one its name loads."""
    return link if isinstance(link, LinkSpec) else load_link(link)


def _link_numbers(link: Any) -> tuple[float, float]:
    if isinstance(link, tuple):
        return float(link[0]), float(link[1])
    spec = _link_spec(link)
    return spec.bandwidth_bytes_per_s, spec.latency_s


def _aggregate(link: Any) -> float | None:
    """A loopback link's ``aggregate_bandwidth_bytes_per_s`` (None for a tuple or without it)."""
    if isinstance(link, tuple):
        return None
    return getattr(_link_spec(link), "aggregate_bandwidth_bytes_per_s", None)


def loop_copy_shares(value: Any) -> tuple[float, float]:
    """(sender's, receiver's) CPU seconds per second of a stream on a loopback link
    (``sender_cpu_share``, ``receiver_cpu_share``, measured by ``hetbed calibrate``), when
    ``value`` names or is a catalog link that has them; else one core for the stream, (1, 0)."""
    spec = load_link(value) if isinstance(value, str) else value
    if isinstance(spec, LinkSpec) and spec.sender_cpu_share and spec.receiver_cpu_share:
        return spec.sender_cpu_share, spec.receiver_cpu_share
    return 1.0, 0.0


def loop_rate(value: Any, machine: str | None) -> float:
    """Bytes/s a task's runtime moves to itself over TCP (a RunGraph request's fed values to
    its own task: ``SimSession``, the step-level drivers): its NIC's rate when that is a loopback link (a bare
    (bytes/s, latency) pair: on a machine shared with other tasks), else 0 (unknown)."""
    if isinstance(value, tuple):
        return float(value[0]) if machine is not None else 0.0
    spec = load_link(value) if isinstance(value, str) else value
    if isinstance(spec, LinkSpec) and spec.kind == "loopback":
        return float(spec.bandwidth_bytes_per_s)
    return 0.0


def _topology(value: str | HostSpec | None) -> HostSpec | None:
    return load_host(value) if isinstance(value, str) else value


def _topology_gpus(host: str, topo: HostSpec, gpu: Any, tpu: Any, peer_link: Any) -> Any:
    """The task's ``gpu`` argument on a host built as ``topo`` (its own GPUs by default)."""
    if tpu or peer_link:
        what = "tpu" if tpu else "peer_link"
        raise ValueError(
            f"{host}: host topology {topo.key!r} places GPUs and wires them itself; drop {what}="
        )
    if not gpu:
        if topo.gpu is None:
            raise ValueError(f"{host}: host topology {topo.key!r} names no gpu; pass gpu=(KEY, N)")
        return (topo.gpu, topo.gpus)
    n = gpu[1] if isinstance(gpu, tuple) else 1
    if n > topo.gpus:
        raise ValueError(f"{host}: host topology {topo.key!r} has {topo.gpus} GPUs, asked for {n}")
    return gpu


class Cluster:
    """Hosts, devices and links of a simulated cluster (see the module docstring).

    ``fabric`` is "switch" (one non-blocking switch) or "two_level" (racks of ``rack_size``
    hosts behind ToR uplinks oversubscribed ``oversubscription`` times). ``hybrid=True`` makes
    devices compute real values too. ``cost_model`` defaults to the roofline, in ``precision``
    (``devices.costmodel.PRECISIONS``: "float32", "tf32", "mixed_float16", "mixed_bfloat16";
    ``set_precision`` changes it later). ``host_topology`` names a catalog host topology
    (``devices/catalog/hosts``, e.g. "dgx1_v100") that every task with GPUs is built as unless
    ``add_task`` names another; the default (None) keeps the plain host: devices on PCIe links
    to host memory, optionally joined pairwise by ``peer_link``. ``collective`` is how an
    op-level all-reduce runs: "ring" (NCCL's ring) or "tree" (its double binary tree;
    simulator/collectives.py).
    """

    def __init__(
        self,
        fabric: str = "switch",
        rack_size: int = 16,
        oversubscription: float = 1.0,
        cost_model: CostModel | None = None,
        hybrid: bool = False,
        env: simpy.Environment | None = None,
        precision: str = "float32",
        host_topology: str | HostSpec | None = None,
        collective: str = "ring",
    ):
        if fabric not in ("switch", "two_level"):
            raise ValueError(f"fabric must be 'switch' or 'two_level', got {fabric!r}")
        if collective not in ("ring", "tree"):
            raise ValueError(f"collective must be 'ring' or 'tree', got {collective!r}")
        if isinstance(rack_size, bool) or int(rack_size) != rack_size or rack_size < 1:
            raise ValueError(f"rack_size must be an integer >= 1, got {rack_size!r}")
        if not (isinstance(oversubscription, (int, float)) and 0 < oversubscription < float("inf")):
            raise ValueError(f"oversubscription must be finite and > 0, got {oversubscription!r}")
        #: how an op-level all-reduce runs: NCCL's ring or its double binary tree
        #: (simulator/collectives.py)
        self.collective = collective
        self.env = as_clock(env) if env is not None else SimClock()
        self.network = Network(self.env)
        self.fabric_kind = fabric
        self.rack_size = rack_size
        self.oversubscription = oversubscription
        self.cost_model = cost_model
        Roofline(precision)  # (raises ValueError naming the choices)
        self.precision = precision
        self.hybrid = hybrid
        self.host_topology = _topology(host_topology)
        self._tasks: list[_TaskSpec] = []
        self._devices: list[SimulatedDevice] | None = None
        self._routes: dict[tuple[str, str], tuple] = {}
        self._fabric: Any = None

    def add_task(
        self,
        job: str,
        task: int,
        cpu: str | None = "xeon_e5_2680v3_2s",
        gpu: tuple[str, int] | str | None = None,
        tpu: tuple[str, int] | str | None = None,
        nic: str | LinkSpec | tuple[float, float] = "eth_10g",
        peer_link: str | None = None,
        replica: int = 0,
        machine: str | None = None,
        host_topology: str | HostSpec | None = None,
    ) -> str:
        """Add one host running task ``/job:job/replica:replica/task:task``; returns its name.

        ``gpu``/``tpu`` name a catalog device (or give a HardwareSpec or DevicePerf) and a count
        (``("v100_sxm2", 8)``); ``cpu`` likewise, one per task; ``nic`` a
        catalog link (its name, or a LinkSpec) or (bytes/s, latency s); ``peer_link`` joins the accelerators pairwise (e.g.
        "nvlink2"); without it they talk through host memory over their host link.
        ``machine`` names the physical host the task runs on: tasks given the same machine share
        its CPU cores (their kernels queue on them one after another and their messages are
        handled on whichever core frees first; devices.simulated.HostCores), as processes of one
        machine do. By default every task has a machine of its own. Tasks of one machine must
        name the same ``cpu``. In a cluster of several tasks a cpu device runs its ops at the
        catalog's ``kernel_launch_overhead_clocked_s`` per op where it has one (each task's
        partition of a distributed step runs on the executor's clocked schedule: its Send/Recv
        are asynchronous); one task is a local session, at ``kernel_launch_overhead_s``.
        ``host_topology`` (default: the cluster's, for a task given GPUs) builds the host as a
        catalog host topology: GPU ``i`` sits on the topology's node ``gpu<i>``, the cpu on its
        first socket, and routes follow its cables (``topology.TopologyHost``); named here,
        ``gpu`` defaults to the topology's own GPU and count. Raises ValueError for more GPUs
        than the topology has, a ``tpu`` or a ``peer_link`` with a topology, and CatalogError
        (a ValueError) for an unknown one.
        """
        if self._devices is not None:
            raise RuntimeError("the cluster is already in use; add tasks before running on it")
        for what, v in (("task", task), ("replica", replica)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"add_task: {what} must be an integer >= 0, got {v!r}")
        host = f"/job:{job}/replica:{replica}/task:{task}"
        if any(t.host == host for t in self._tasks):
            raise ValueError(f"task {host} is already in the cluster")
        if isinstance(nic, str):
            kind = load_link(nic).kind
            if kind not in ("ethernet", "infiniband", "loopback"):
                raise ValueError(
                    f"add_task {host}: nic {nic!r} is a {kind} link, not a network between hosts "
                    "(an ethernet, infiniband or loopback entry)"
                )
        spec = _TaskSpec(host, nic, peer_link=peer_link, machine=machine)
        if machine is not None:
            other = next((t for t in self._tasks if t.machine == machine), None)
            if other is not None and other.cpu != cpu:
                raise ValueError(
                    f"{host}: machine {machine!r} already runs {other.host} with cpu "
                    f"{other.cpu!r}; tasks of one machine share its cores and must name the same "
                    f"cpu, got {cpu!r}"
                )
        spec.cpu = cpu
        topo = _topology(host_topology)
        if topo is None and gpu:  # the cluster's topology, for a task with GPUs
            topo = self.host_topology
        if topo is not None:
            gpu = _topology_gpus(host, topo, gpu, tpu, peer_link)
            spec.topology = topo
        if cpu:
            spec.devices.append(("cpu", cpu, 1))
        for kind, val in (("gpu", gpu), ("tpu", tpu)):
            if val:
                key, n = val if isinstance(val, tuple) else (val, 1)
                if n < 1:
                    raise ValueError(f"{host}: {kind} count must be >= 1, got {n}")
                spec.devices.append((kind, key, int(n)))
        if not spec.devices:
            raise ValueError(f"{host}: a task needs at least one device")
        self._tasks.append(spec)
        return host

    # ---- built on first use ---------------------------------------------------------------
    def _build(self) -> None:
        if self._devices is not None:
            return
        nics = {t.host: Nic(*_link_numbers(t.nic)) for t in self._tasks}
        self._task_of = {t.host: t for t in self._tasks}
        self._loops: dict[str, Any] = {}
        if self.fabric_kind == "switch":
            self._fabric = SwitchFabric(self.network, nics)
        else:
            names = [t.host for t in self._tasks]
            racks = [names[i : i + self.rack_size] for i in range(0, len(names), self.rack_size)]
            nic_list = list(nics.values())
            self._fabric = TwoLevelFabric(
                self.network, racks, nic_list[0], oversubscription=self.oversubscription
            )
        devices = []
        machines: dict[str, HostCores] = {}
        self._task_cpu: dict[str, SimulatedDevice] = {}
        self._task_devices: dict[str, list[SimulatedDevice]] = {}
        distributed = len(self._tasks) > 1  # (each task's partition runs clocked)
        sharing = collections.Counter(t.machine for t in self._tasks if t.machine is not None)
        for t in self._tasks:
            h = self._fabric.host(t.host)
            if t.topology is not None:
                h = self._fabric.attach_topology(t.host, t.topology)
            mine = self._task_devices[t.host] = []
            accel = []
            for kind, key, n in t.devices:
                hw = load_device(key) if isinstance(key, str) else key
                perf = perf_from_spec(hw)
                if distributed and kind == "cpu":
                    perf = perf.clocked()
                if kind == "cpu" and sharing.get(t.machine, 0) > 1:
                    perf = perf.shared_host(sharing[t.machine])
                for i in range(n):
                    name = f"device:{kind}:{i}"
                    dev = SimulatedDevice(
                        f"{t.host}/{name}",
                        perf,
                        self.env,
                        kind=kind,
                        cost_model=self.cost_model or Roofline(self.precision),
                        hybrid=self.hybrid,
                        infer_shapes=output_shapes,
                    )
                    dev.hardware = hw
                    mine.append(dev)
                    if kind == "cpu":
                        self._task_cpu.setdefault(t.host, dev)
                        dev.copy_shares = loop_copy_shares(t.nic)
                        if t.machine is not None:  # (colder buffers among more processes)
                            k = perf.byte_factor(sharing.get(t.machine, 1))
                            dev.copy_shares = (dev.copy_shares[0] * k, dev.copy_shares[1] * k)
                        dev.loop_rate = loop_rate(t.nic, t.machine)
                        if t.machine is not None and dev.host_cores is not None:
                            dev.host_cores = machines.setdefault(t.machine, dev.host_cores)
                        h.add_memory_device(name)
                    elif t.topology is not None:
                        h.add_device(name, f"gpu{i}")
                    else:
                        bw, lat = _link_numbers(getattr(hw, "host_link", None) or "pcie3_x16")
                        h.add_device_link(name, bw, lat)
                        accel.append(name)
                    devices.append(dev)
            if t.peer_link:
                bw, lat = _link_numbers(t.peer_link)
                for i, a in enumerate(accel):
                    for b in accel[i + 1 :]:
                        h.add_peer_link(a, b, bw, lat)
        self._devices = devices

    def devices(self) -> list[SimulatedDevice]:
        self._build()
        return list(self._devices or [])

    @property
    def tasks(self) -> list[str]:
        """The tasks' names (``/job:J/replica:R/task:T``), in the order they were added."""
        return [t.host for t in self._tasks]

    def task_cpu(self, task: str) -> SimulatedDevice | None:
        """The cpu device of ``task`` (its host CPU: it handles the task's messages), or None
        when the task has none."""
        self._build()
        return self._task_cpu.get(task)

    def task_devices(self, task: str) -> list[SimulatedDevice]:
        """The devices of ``task``. Raises KeyError for a task not in the cluster."""
        self._build()
        return list(self._task_devices[task])

    def set_precision(self, precision: str) -> None:
        """Price float32 models in ``precision`` from now on (see ``Roofline``): every simulated
        device whose cost model is the roofline, or a profiled table falling back to it (its
        measured entries stay as measured), takes the new precision. Raises ValueError for an
        unknown precision."""
        Roofline(precision)
        self.precision = precision
        for d in self._devices or []:
            cm = d.cost_model
            if type(cm) is Roofline:
                d.cost_model = Roofline(precision)
            elif isinstance(getattr(cm, "fallback", None), Roofline):
                cm.fallback = Roofline(precision)
                d.cost_model = cm  # (forgets the device's plans)

    def route(self, src_device: str, dst_device: str) -> tuple:
        """The links a transfer from ``src_device`` to ``dst_device`` crosses (a shared tuple).

        Two tasks of one machine whose link is a loopback with an aggregate rate
        (``aggregate_bandwidth_bytes_per_s``, measured by ``hetbed calibrate``) have no NICs
        between them: loopback TCP is the machine's cores copying each stream, so a stream gets
        its own link at the single-stream rate (one per ordered pair of tasks, with their
        links' latency) and every stream between the machine's tasks shares one link at the
        aggregate rate; the copies' cores are booked as for any loopback flow (SimRendezvous)."""
        key = (src_device, dst_device)
        path = self._routes.get(key)
        if path is None:  # the topology is fixed once built: each pair is routed once
            self._build()
            path = self._loopback(src_device, dst_device) or tuple(
                self._fabric.route_devices(src_device, dst_device)
            )
            self._routes[key] = path
        return path

    def _loopback(self, src_device: str, dst_device: str) -> tuple | None:
        """(pair link, machine link) from ``src_device``'s task to ``dst_device``'s when they
        are two tasks of one machine on a loopback with an aggregate rate, else None."""
        a = self._task_of.get(src_device.rpartition("/")[0])
        b = self._task_of.get(dst_device.rpartition("/")[0])
        if a is None or b is None or a is b or a.machine is None or a.machine != b.machine:
            return None
        agg = _aggregate(a.nic)
        if agg is None or _aggregate(b.nic) is None:
            return None
        (bw_a, lat_a), (bw_b, lat_b) = _link_numbers(a.nic), _link_numbers(b.nic)
        pair_name = f"{a.machine}:loopback:{a.host}->{b.host}"
        if pair_name not in self._loops:
            self._loops[pair_name] = self.network.add_link(
                pair_name, min(bw_a, bw_b), (lat_a + lat_b) / 2
            )
        shared = f"{a.machine}:loopback"
        if shared not in self._loops:
            self._loops[shared] = self.network.add_link(shared, agg, 0.0)
        return (self._loops[pair_name], self._loops[shared])

    def describe(self) -> list[dict]:
        """One row per device: name, kind, catalog key, peak float32 FLOP/s, memory bytes."""
        return [
            {
                "device": d.name,
                "kind": d.device_type,
                "hardware": getattr(d.hardware, "key", getattr(d.hardware, "name", "")),
                "peak_float32_flops": d.perf_spec.peak("float32", False),
                "memory_bytes": d.memory_limit_bytes,
            }
            for d in self.devices()
        ]
