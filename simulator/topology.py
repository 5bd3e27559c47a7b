"""Hosts, their devices and the fabric between them, as Links of a Network.

A fabric builder creates the Links of an inter-host network and answers ``route(src_host,
dst_host)``; each host's devices hang off the host by PCIe-like links and may be joined pairwise by
NVLink-like peer links. ``Fabric.route_devices(src, dst)`` gives the path a tensor takes between two
devices named ``"HOST/DEVICE"`` (split at the last '/', so TensorFlow names such as
``/job:worker/replica:0/task:3/device:GPU:1`` work with host ``/job:worker/replica:0/task:3``):

- same device: no links;
- same host: the peer link when one exists, else device -> host memory -> device (the PCIe up
  link of the source, the PCIe down link of the destination);
- different hosts: PCIe up of the source, the fabric route between the hosts, PCIe down of the
  destination.

A device added with ``Host.add_memory_device`` (a CPU) lives in host memory and has no PCIe hop.
Bandwidths are bytes/s per direction, latencies seconds; every link is one direction.

That is the default host. ``Fabric.attach_topology(host, spec)`` makes a host a ``TopologyHost``
instead: its devices sit on the nodes of a catalog host topology (``devices/catalog/hosts``: CPU
sockets, PCIe switches, NVSwitches, NICs and the GPUs, joined by cables of given link types), one
Link per cable and direction, and a route between two of its nodes is the **widest path** (the
largest bottleneck bandwidth), among those the fewest hops, among those the first found in the
order the file lists its cables. Routes pass through sockets and switches only, never through a
GPU or a NIC. On such a host a device's way to the network (``up``/``down``) is its route to the
nearest NIC node (widest, then fewest hops), or to host memory (the first socket) when the
topology has no NIC; the host's link to the fabric stays the one NIC link of the fabric.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetbed.simulator.network import Link, Network

if TYPE_CHECKING:  # pragma: no cover
    from hetbed.devices.catalog import HostSpec

__all__ = ["Fabric", "Host", "Nic", "SwitchFabric", "TopologyHost", "TwoLevelFabric"]


@dataclass(frozen=True)
class Nic:
    """A host's network interface: bandwidth per direction and one-way host-to-host latency.

    A route through a switch splits latency evenly: the uplink of the source gets half its NIC's
    latency, the downlink of the destination half of its own, so two equal NICs see exactly
    ``latency_s`` end to end.
    """

    bandwidth_bytes_per_s: float
    latency_s: float = 0.0


def _as_nic(value: Nic | tuple[float, float]) -> Nic:
    return value if isinstance(value, Nic) else Nic(*value)


class Host:
    """A machine: its devices, their links to host memory and the peer links between them."""

    def __init__(self, name: str, network: Network):
        self.name = name
        self.network = network
        self.devices: dict[str, tuple[Link, Link] | None] = {}  # device -> (up, down) or None
        self._peers: dict[tuple[str, str], Link] = {}

    def add_device_link(
        self, device: str, bandwidth: float, latency: float = 0.0
    ) -> tuple[Link, Link]:
        """Attach ``device`` to host memory by two Links (device->host, host->device), e.g. PCIe.

        Raises ValueError if the device exists already or its name contains '/'.
        """
        self._check_new(device)
        up = self.network.add_link(f"{self.name}/{device}:pcie:up", bandwidth, latency)
        down = self.network.add_link(f"{self.name}/{device}:pcie:down", bandwidth, latency)
        self.devices[device] = (up, down)
        return up, down

    def add_memory_device(self, device: str) -> None:
        """Add a device living in host memory (a CPU): it reaches host memory without a link."""
        self._check_new(device)
        self.devices[device] = None

    def add_peer_link(
        self, a: str, b: str, bandwidth: float, latency: float = 0.0
    ) -> tuple[Link, Link]:
        """Join devices ``a`` and ``b`` directly (e.g. NVLink) by Links a->b and b->a.

        Raises KeyError for an unknown device, ValueError for a duplicate or a self link.
        """
        self._device_links(a), self._device_links(b)
        if a == b or (a, b) in self._peers:
            raise ValueError(
                f"host {self.name!r}: cannot add a peer link {a!r}<->{b!r} (exists or self)"
            )
        ab = self.network.add_link(f"{self.name}/{a}:peer:{b}", bandwidth, latency)
        ba = self.network.add_link(f"{self.name}/{b}:peer:{a}", bandwidth, latency)
        self._peers[(a, b)], self._peers[(b, a)] = ab, ba
        return ab, ba

    def up(self, device: str) -> list[Link]:
        """Links from ``device`` to host memory (none for a memory device)."""
        links = self._device_links(device)
        return [links[0]] if links else []

    def down(self, device: str) -> list[Link]:
        """Links from host memory to ``device`` (none for a memory device)."""
        links = self._device_links(device)
        return [links[1]] if links else []

    def route(self, src: str, dst: str) -> list[Link]:
        """Links from device ``src`` to device ``dst`` on this host."""
        if src == dst:
            self._device_links(src)
            return []
        peer = self._peers.get((src, dst))
        if peer is not None:
            return [peer]
        return self.up(src) + self.down(dst)

    def _device_links(self, device: str) -> tuple[Link, Link] | None:
        try:
            return self.devices[device]
        except KeyError:
            raise KeyError(
                f"unknown device {device!r} on host {self.name!r}; it has {sorted(self.devices)}"
            ) from None

    def _check_new(self, device: str) -> None:
        if "/" in device or not device:
            raise ValueError(
                f"host {self.name!r}: device name must be non-empty without '/', got {device!r}"
            )
        if device in self.devices:
            raise ValueError(f"host {self.name!r} already has a device {device!r}")

    def __repr__(self) -> str:
        return f"Host({self.name!r}, devices={sorted(self.devices)})"


class TopologyHost(Host):
    """A host built as a catalog host topology (see the module docstring).

    GPUs go on their nodes with ``add_device(device, node)``; memory devices (CPUs) live on the
    topology's memory node. ``add_device_link`` and ``add_peer_link`` raise ValueError: the
    topology's cables are the links. Links are named ``HOST/A->B:LINKKEY``.
    """

    def __init__(self, name: str, network: Network, spec: HostSpec):
        super().__init__(name, network)
        self.spec = spec
        self.kinds = dict(spec.nodes)
        self._out: dict[str, list[tuple[str, Link]]] = {n: [] for n in self.kinds}
        for w in spec.wires:
            bw, lat = w.link.bandwidth_bytes_per_s, w.link.latency_s
            for a, b in ((w.a, w.b), (w.b, w.a)):
                link = network.add_link(f"{name}/{a}->{b}:{w.link.key}", bw, lat)
                self._out[a].append((b, link))
        self._widths = sorted({x.bandwidth_bytes_per_s for v in self._out.values() for _, x in v})
        self.node_of: dict[str, str] = {}
        self._paths: dict[tuple[str, str], list[Link]] = {}
        nics = [n for n, k in self.kinds.items() if k == "nic"]
        self._exits = nics or [spec.memory_node]  # where traffic may leave the host
        self._exit: dict[str, str] = {}  # node -> its (nearest) exit

    def add_device(self, device: str, node: str) -> None:
        """Put ``device`` (e.g. ``device:gpu:3``) on GPU node ``node`` (``gpu3``).

        Raises ValueError for a node that is not a GPU of the topology or already holds one.
        """
        self._check_new(device)
        if self.kinds.get(node) != "gpu":
            gpus = [n for n, k in self.kinds.items() if k == "gpu"]
            raise ValueError(
                f"host {self.name!r} ({self.spec.key}): no GPU node {node!r}; it has {gpus}"
            )
        if node in self.node_of.values():
            raise ValueError(f"host {self.name!r}: GPU node {node!r} already holds a device")
        self.devices[device] = None
        self.node_of[device] = node

    def add_memory_device(self, device: str) -> None:
        """Add a device living in host memory (a CPU): on the topology's first socket."""
        self._check_new(device)
        self.devices[device] = None
        self.node_of[device] = self.spec.memory_node

    def add_device_link(self, device: str, bandwidth: float, latency: float = 0.0) -> tuple:
        raise ValueError(
            f"host {self.name!r} is built as {self.spec.key!r}: its links come from the topology;"
            " place a GPU with add_device(device, node)"
        )

    def add_peer_link(self, a: str, b: str, bandwidth: float, latency: float = 0.0) -> tuple:
        raise ValueError(
            f"host {self.name!r} is built as {self.spec.key!r}: its GPU-to-GPU links come from "
            "the topology, not from add_peer_link"
        )

    def up(self, device: str) -> list[Link]:
        node = self._node(device)
        return self.path(node, self._exit_of(node))

    def down(self, device: str) -> list[Link]:
        node = self._node(device)
        return self.path(self._exit_of(node), node)

    def route(self, src: str, dst: str) -> list[Link]:
        return self.path(self._node(src), self._node(dst))

    def path(self, a: str, b: str) -> list[Link]:
        """Links from node ``a`` to node ``b``: the widest path, then the fewest hops.

        Raises KeyError for an unknown node, ValueError when no route joins them."""
        for n in (a, b):
            if n not in self.kinds:
                raise KeyError(f"host {self.name!r}: unknown node {n!r}; it has {list(self.kinds)}")
        key = (a, b)
        if key not in self._paths:
            self._paths[key] = self._search(a, b)
        return list(self._paths[key])

    def _search(self, a: str, b: str) -> list[Link]:
        if a == b:
            return []
        for width in reversed(self._widths):  # the widest bottleneck that still joins a to b
            found = self._bfs(a, b, width)
            if found is not None:
                return found
        raise ValueError(
            f"host {self.name!r} ({self.spec.key}): no route from {a!r} to {b!r} through "
            "sockets and switches"
        )

    def _bfs(self, a: str, b: str, width: float) -> list[Link] | None:
        """Fewest-hop path over links at least ``width`` wide, through transit nodes only."""
        prev: dict[str, tuple[str, Link] | None] = {a: None}
        frontier = [a]
        while frontier:
            nxt = []
            for n in frontier:
                if n != a and self.kinds[n] in ("gpu", "nic"):
                    continue  # an end, never a relay
                for m, link in self._out[n]:
                    if m in prev or link.bandwidth_bytes_per_s < width:
                        continue
                    prev[m] = (n, link)
                    if m == b:
                        path = []
                        while prev[m] is not None:
                            m, hop = prev[m]  # type: ignore[misc]
                            path.append(hop)
                        return path[::-1]
                    nxt.append(m)
            frontier = nxt
        return None

    def _exit_of(self, node: str) -> str:
        out = self._exit.get(node)
        if out is None:
            best = None
            for nic in self._exits:
                p = self.path(node, nic)
                rank = (-min((x.bandwidth_bytes_per_s for x in p), default=float("inf")), len(p))
                if best is None or rank < best[0]:
                    best = (rank, nic)
            out = self._exit[node] = best[1]  # type: ignore[index]
        return out

    def _node(self, device: str) -> str:
        try:
            return self.node_of[device]
        except KeyError:
            raise KeyError(
                f"unknown device {device!r} on host {self.name!r}; it has {sorted(self.devices)}"
            ) from None


class Fabric:
    """Base of fabric builders: owns one Host per host name and routes between hosts and devices.

    Subclasses create the inter-host Links and implement ``route``.
    """

    def __init__(self, network: Network, host_names: list[str]):
        self.network = network
        self.hosts: dict[str, Host] = {}
        for name in host_names:
            if name in self.hosts:
                raise ValueError(f"host {name!r} appears twice in the fabric")
            self.hosts[name] = Host(name, network)

    def host(self, name: str) -> Host:
        """The Host called ``name``; raises KeyError listing the hosts."""
        try:
            return self.hosts[name]
        except KeyError:
            raise KeyError(f"unknown host {name!r}; this fabric has {sorted(self.hosts)}") from None

    def attach_topology(self, name: str, spec: HostSpec) -> TopologyHost:
        """Build host ``name`` as the catalog host topology ``spec`` (a ``TopologyHost``).

        Raises KeyError for an unknown host, ValueError when it already has devices."""
        host = self.host(name)
        if host.devices:
            raise ValueError(f"host {name!r} already has devices; attach its topology first")
        built = self.hosts[name] = TopologyHost(name, self.network, spec)
        return built

    def route(self, src_host: str, dst_host: str) -> list[Link]:
        """Links from host ``src_host`` to host ``dst_host`` (none for the same host)."""
        raise NotImplementedError(f"{type(self).__name__} needs a route(src_host, dst_host) method")

    def route_devices(self, src_device: str, dst_device: str) -> list[Link]:
        """Links from ``"HOST/DEVICE"`` to ``"HOST/DEVICE"`` (see the module docstring).

        Raises KeyError for an unknown host or device, ValueError for a name without '/'.
        """
        src_host, src = _split(src_device)
        dst_host, dst = _split(dst_device)
        a, b = self.host(src_host), self.host(dst_host)
        if a is b:
            return a.route(src, dst)
        return a.up(src) + self.route(src_host, dst_host) + b.down(dst)


def _split(device: str) -> tuple[str, str]:
    host, sep, name = device.rpartition("/")
    if not sep or not name:
        raise ValueError(f"device {device!r} must be named 'HOST/DEVICE'")
    return host, name


class SwitchFabric(Fabric):
    """Hosts on one non-blocking switch: a route is [uplink(src), downlink(dst)].

    Each host gets ``HOST:nic:up`` (host->switch) and ``HOST:nic:down`` (switch->host) at its NIC
    bandwidth, each with half the NIC latency.
    """

    def __init__(self, network: Network, hosts: Mapping[str, Nic | tuple[float, float]]):
        super().__init__(network, list(hosts))
        self.uplink: dict[str, Link] = {}
        self.downlink: dict[str, Link] = {}
        for name, value in hosts.items():
            nic = _as_nic(value)
            half = nic.latency_s / 2
            self.uplink[name] = network.add_link(f"{name}:nic:up", nic.bandwidth_bytes_per_s, half)
            self.downlink[name] = network.add_link(
                f"{name}:nic:down", nic.bandwidth_bytes_per_s, half
            )

    def route(self, src_host: str, dst_host: str) -> list[Link]:
        self.host(src_host), self.host(dst_host)
        if src_host == dst_host:
            return []
        return [self.uplink[src_host], self.downlink[dst_host]]


class TwoLevelFabric(SwitchFabric):
    """Racks of hosts under top-of-rack switches joined by a non-blocking core.

    Within a rack a route is [uplink(src), downlink(dst)] as in ``SwitchFabric``. Across racks it
    is [uplink(src), ToR uplink(src rack), ToR downlink(dst rack), downlink(dst)]. The ToR links
    (``rackR:tor:up``/``rackR:tor:down``) carry ``rack_uplink_bandwidth`` each if given, else the
    sum of the rack's NIC bandwidths divided by ``oversubscription`` (default 1: non-blocking);
    each has half of ``core_latency_s``.

    Raises ValueError for an empty rack, both or neither sizing option out of range, or a host in
    two racks.
    """

    def __init__(
        self,
        network: Network,
        racks: list[list[str]],
        nic: Nic | tuple[float, float] | Mapping[str, Nic | tuple[float, float]],
        oversubscription: float | None = None,
        rack_uplink_bandwidth: float | None = None,
        core_latency_s: float = 0.0,
    ):
        if oversubscription is not None and rack_uplink_bandwidth is not None:
            raise ValueError("give oversubscription or rack_uplink_bandwidth, not both")
        ratio = 1.0 if oversubscription is None else float(oversubscription)
        if not ratio > 0:
            raise ValueError(f"oversubscription must be > 0, got {oversubscription!r}")
        if any(not rack for rack in racks):
            raise ValueError(f"every rack needs at least one host, got {racks!r}")
        names = [h for rack in racks for h in rack]
        if len(set(names)) != len(names):
            twice = sorted({h for h in names if names.count(h) > 1})
            raise ValueError(f"hosts {twice} appear in more than one rack")
        if isinstance(nic, Mapping):
            nics = {h: _as_nic(nic[h]) for h in names}
        else:
            nics = dict.fromkeys(names, _as_nic(nic))
        super().__init__(network, nics)
        self.rack_of = {h: r for r, rack in enumerate(racks) for h in rack}
        self.tor_up: list[Link] = []
        self.tor_down: list[Link] = []
        half = core_latency_s / 2
        for r, rack in enumerate(racks):
            if rack_uplink_bandwidth is None:
                bw = sum(nics[h].bandwidth_bytes_per_s for h in rack) / ratio
            else:
                bw = rack_uplink_bandwidth
            self.tor_up.append(network.add_link(f"rack{r}:tor:up", bw, half))
            self.tor_down.append(network.add_link(f"rack{r}:tor:down", bw, half))

    def route(self, src_host: str, dst_host: str) -> list[Link]:
        links = super().route(src_host, dst_host)
        rs, rd = self.rack_of[src_host], self.rack_of[dst_host]
        if rs == rd:
            return links
        return [links[0], self.tor_up[rs], self.tor_down[rd], links[1]]
