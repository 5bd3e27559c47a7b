"""Host topologies: how a machine's GPUs, PCIe switches, CPU sockets, NVSwitches and NICs are
wired, as catalog data (``hosts/<key>.toml``, ``kind = "host"``).

A host file names its GPUs implicitly (``gpu0`` .. ``gpu{gpus-1}``), lists its other nodes under
``[nodes]`` (``name = "socket" | "pcie_switch" | "nvswitch" | "nic"``) and its cables under
``[[links]]``, one group per link type::

    name = "..."; kind = "host"; description = "..."     words
    gpu = "v100_sxm2"                                    optional: the GPU it is built with
    gpus = { value = 8, source = "..." }                 required
    [nodes]
    cpu0 = "socket"
    [[links]]
    link = "nvlink2"                                     a link key of the catalog
    count = { value = 2, source = "..." }                optional: physical links per pair
    pairs = [["gpu0", "gpu3"], ["gpu1", "gpu2"]]         the pairs this group joins
    source = "..."                                       where the wiring is documented
    note = "..."                                         optional

Each pair is one full-duplex cable: ``count`` x the link's ``per_link_bandwidth_bytes_per_s``
per direction when ``count`` is given (NVLink), else the link's ``bandwidth_bytes_per_s``. The
first socket holds host memory (where CPU devices live). GPUs and NICs are endpoints only: a
route never passes *through* a GPU or a NIC (a GPU does not forward another GPU's traffic by
itself; software that relays through a GPU, as NCCL's rings may, is not modelled). Validation
checks that every GPU can reach host memory on such routes. Errors are ``CatalogError`` naming
the file and field path, e.g. ``dgx1_v100.toml: links[2].pairs[1]: unknown node 'gpu9'``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from . import LinkSpec, _Reader

__all__ = ["HostSpec", "Wire", "NODE_KINDS", "TRANSIT_KINDS"]

NODE_KINDS = ("socket", "pcie_switch", "nvswitch", "nic")
#: kinds a route may pass through (GPUs and NICs are only ends)
TRANSIT_KINDS = ("socket", "pcie_switch", "nvswitch")
_FIELDS = {"name", "kind", "description", "gpu", "gpus", "nodes", "links"}
_LINK_FIELDS = {"link", "count", "pairs", "source", "note"}


@dataclass(frozen=True)
class Wire:
    """One full-duplex cable between nodes ``a`` and ``b``; ``link`` carries its bandwidth (per
    direction, ``count`` links already multiplied in) and latency."""

    a: str
    b: str
    link: LinkSpec
    count: int | None = None


@dataclass(frozen=True)
class HostSpec:
    """A host topology as read from its TOML file (see the module docstring)."""

    key: str
    name: str
    gpus: int
    nodes: dict[str, str] = field(hash=False)  # every node (gpus first) -> its kind
    wires: tuple[Wire, ...] = ()
    gpu: str | None = None
    description: str = ""
    kind: str = "host"
    sources: dict[str, str] = field(default_factory=dict, hash=False)
    notes: dict[str, str] = field(default_factory=dict, hash=False)
    path: str = ""

    @property
    def memory_node(self) -> str:
        """The node holding host memory: the first socket."""
        return next(n for n, k in self.nodes.items() if k == "socket")

    def gpu_nodes(self) -> list[str]:
        return [f"gpu{i}" for i in range(self.gpus)]


def read_host(r: _Reader) -> HostSpec:
    """Parse a ``kind = "host"`` file read by ``r``; raises CatalogError naming the field."""
    from . import load_device, load_link

    gpus = r.number("gpus", integer=True)
    nodes: dict[str, str] = {f"gpu{i}": "gpu" for i in range(gpus)}
    table = r.doc.get("nodes")
    if not isinstance(table, dict) or not table:
        raise r.error("nodes", 'expected a table of name = kind, e.g. cpu0 = "socket"')
    for name, kind in table.items():
        if name in nodes or (name.startswith("gpu") and name[3:].isdigit()):
            raise r.error(f"nodes.{name}", f"GPUs are named gpu0..gpu{gpus - 1} without listing")
        if kind not in NODE_KINDS:
            raise r.error(f"nodes.{name}", f"unknown node kind {kind!r}; known: {NODE_KINDS}")
        nodes[name] = kind
    if "socket" not in nodes.values():
        raise r.error("nodes", "a host needs at least one socket (host memory is on the first)")
    groups = r.doc.get("links")
    if not isinstance(groups, list) or not groups:
        raise r.error("links", "expected [[links]] tables: link, pairs, source, optional count")
    wires: list[Wire] = []
    seen: set[frozenset] = set()
    for i, group in enumerate(groups):
        fp = f"links[{i}]"
        if not isinstance(group, dict):
            raise r.error(fp, f"expected a table, got {group!r:.80}")
        unknown = set(group) - _LINK_FIELDS
        if unknown:
            raise r.error(f"{fp}.{sorted(unknown)[0]}", f"unknown field; known: {_LINK_FIELDS}")
        g = r.sub(group, fp)
        key = g.word("link")
        try:
            link = load_link(key)
        except ValueError as e:
            raise r.error(f"{fp}.link", str(e)) from None
        count = g.number("count", required=False, integer=True)
        if count is not None:
            if link.per_link_bandwidth_bytes_per_s is None:
                raise r.error(f"{fp}.count", f"link {key!r} has no per_link_bandwidth_bytes_per_s")
            link = link.with_links(count)
        r.sources[fp] = g.word("source")  # where this group's wiring is documented
        note = g.word("note", required=False)
        if note:
            r.notes[fp] = note
        pairs = group.get("pairs")
        if not isinstance(pairs, list) or not pairs:
            raise r.error(f"{fp}.pairs", 'expected a list of [node, node], e.g. [["gpu0", "cpu0"]]')
        for j, pair in enumerate(pairs):
            wires.append(_wire(r, f"{fp}.pairs[{j}]", pair, nodes, link, count, seen))
    gpu = r.word("gpu", required=False)
    if gpu is not None:
        try:
            kind = load_device(gpu).kind
        except ValueError as e:
            raise r.error("gpu", str(e)) from None
        if kind != "gpu":
            raise r.error("gpu", f"{gpu!r} is a {kind}, not a gpu")
    spec = HostSpec(
        key=r.path.stem,
        name=r.word("name"),
        gpus=gpus,
        nodes=nodes,
        wires=tuple(wires),
        gpu=gpu,
        description=r.word("description", required=False) or "",
        sources=r.sources,
        notes=r.notes,
        path=str(r.path),
    )
    r.finish(_FIELDS)
    _check_reachable(r, spec)
    return spec


def _wire(r: Any, fp: str, pair: Any, nodes: dict, link: Any, count: Any, seen: set) -> Wire:
    if not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(x, str) for x in pair):
        raise r.error(fp, f"expected [node, node], got {pair!r:.80}")
    a, b = pair
    for x in (a, b):
        if x not in nodes:
            raise r.error(fp, f"unknown node {x!r}; this host has {', '.join(nodes)}")
    if a == b or frozenset(pair) in seen:
        raise r.error(fp, f"{a!r}-{b!r} joins a node to itself or is listed twice")
    if nodes[a] == "nic" and nodes[b] == "nic":
        raise r.error(fp, f"{a!r}-{b!r}: NICs reach the host through a switch or socket")
    seen.add(frozenset(pair))
    return Wire(a, b, link, count)


def _check_reachable(r: Any, spec: HostSpec) -> None:
    """Every GPU and NIC must reach host memory through transit nodes only."""
    adj: dict[str, list[str]] = {n: [] for n in spec.nodes}
    for w in spec.wires:
        adj[w.a].append(w.b)
        adj[w.b].append(w.a)
    start = spec.memory_node
    seen, todo = {start}, [start]
    while todo:
        n = todo.pop()
        if n != start and spec.nodes[n] not in TRANSIT_KINDS:
            continue
        for m in adj[n]:
            if m not in seen:
                seen.add(m)
                todo.append(m)
    lost = [n for n, k in spec.nodes.items() if k in ("gpu", "nic") and n not in seen]
    if lost:
        raise r.error(
            "links",
            f"{', '.join(lost)} cannot reach host memory ({start}) through sockets and switches",
        )
