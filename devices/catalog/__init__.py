"""Hardware catalog: devices and links as TOML data, every number with its source.

One TOML file per device (``devices/<key>.toml``) or link (``links/<key>.toml``); the file stem is
the key that ``load_device`` / ``load_link`` take. The scheme, one rule for every file:

* **Every number is a sourced table** ``{ value = ..., source = "...", note = "..." }``. ``source``
  names the datasheet, whitepaper or paper (with its year), or says ``"hetbed estimate"`` /
  ``"measured by hetbed calibrate"``; ``note`` (optional) says how a value was derived or why it is
  an estimate. A bare number is an error.
* **Words may be bare** (``name``, ``kind``, ``description``, and link names such as ``host_link``),
  or sourced tables of the same form when the choice itself needs a source or note.
* Units are in the field names (``_bytes``, ``_bytes_per_s``, ``_s``, ``_hz``); rates are per
  second, bandwidths per direction, FLOP counts per chip (or per die, as the name says).

Device fields (``kind`` is ``"cpu"``, ``"gpu"`` or ``"tpu"``)::

    name, kind                         required words
    peak_flops.<dtype>                 required, at least one dtype: vector/SIMD peak FLOP/s
    matrix_peak_flops.<dtype>          tensor cores / systolic arrays (required for tpu)
    memory_bandwidth_bytes_per_s       required: the datasheet's (peak) memory bandwidth
    stream_bandwidth_bytes_per_s       optional (gpu): the rate a streaming kernel reaches
                                       (STREAM's scale: bytes read and written, buffers far
                                       larger than the caches), measured or estimated from
                                       measured GPUs; the cost model's memory rate where given
                                       (``memory_rate``), else memory_bandwidth_bytes_per_s
    memory_bytes                       required (device memory; host DRAM for a cpu)
    cache_bytes                        optional (cpu): the last-level cache; with
    cache_bandwidth_bytes_per_s        (both or neither) the rate of a working set that fits it:
                                       an op moving B bytes takes the share of them a sweep
                                       finds in a 16-way cache (costmodel.cache_hit) at this
                                       rate, the rest at memory_bandwidth
    fresh_memory_threshold_bytes       optional (cpu): arrays this size or more get new pages from
    fresh_memory_s_per_byte            the allocator (both or neither), which the OS faults in and
                                       zeroes at this cost per byte (glibc: mmap past its
                                       threshold, at most 32 MiB on 64-bit)
    kernel_launch_overhead_s           required: per-kernel launch (gpu), per-op dispatch (cpu, tpu)
    kernel_launch_overhead_clocked_s   optional (cpu): per-op dispatch of the executor's clocked
                                       schedule, which runs every partition of a distributed step
                                       (its Send/Recv are asynchronous); default: the above
    host_link                          link key to the host (required for gpu and tpu)
    peer_link, network_link            optional link keys: device-to-device, the host's NIC
    systolic_array_shape = [rows, cols], matrix_units   (required for tpu; per chip)
    cores, fp32_lanes, clock_hz        optional: how the peaks are derived (a GPU's clock_hz
                                       with tile_loads "tma" also sets its shared memory's
                                       rate, 128 B a clock: the TF32 transpositions of
                                       gpukernels.transposition_seconds)
    multiprocessors                    optional (gpu): SMs, for the tiled GEMM model (gpukernels.py)
    warp_issue_per_clock               optional (gpu): warp instructions one SM issues per clock
                                       (schedulers x dispatch units; the tiled GEMM model's issue
                                       limit of CUDA-core products)
    tile_loads                         optional (gpu): "tma" where tensor-core GEMM kernels load
                                       their operand tiles by the Tensor Memory Accelerator's
                                       bulk 2-D copies (Hopper), else "threads" (the default:
                                       each thread loads its share; the tiled GEMM model's
                                       short-run reads, gpukernels.py)
    unaligned_matrix_peak_flops.<dtype>
                                       optional (gpu, with tile_loads "tma"): the matrix peak
                                       a product runs at whose stored rows are not multiples of
                                       16 bytes (the TMA cannot load them: the library runs
                                       the previous generation's kernels), at most the matrix
                                       peak, for dtypes the matrix peak lists (gpukernels.py)
    [conv_algorithms]                  optional (gpu): per dtype, { value = [names], source }:
                                       the convolution algorithms the GPU's library runs
                                       (gpuconv.py: implicit_gemm, which must be listed,
                                       winograd, gemm_col2im, gemm_1x1; "name:pass" offers it
                                       for that pass only: fwd, bwd_input, bwd_filter); a dtype
                                       not listed, or a GPU without the table, gets
                                       gpuconv.DEFAULT_MENU
    message_overhead_s                 optional (cpu): CPU time one end of a message between tasks
                                       spends on it apart from its bytes (RPC layer, framing,
                                       system calls, wake-ups); a request or a reply is a message
    control_message_overhead_s         optional (cpu): the same for a step's control messages
                                       (a RunGraph call's request or reply; hetbed's data
                                       channel makes them cheaper than a RecvTensor call's);
                                       default: message_overhead_s
    own_control_message_overhead_s     optional (cpu): the same for a RunGraph call from a client
                                       to a task of its own process (both ends in one process:
                                       no other process to wake); default:
                                       control_message_overhead_s
    message_overhead_s_per_byte        optional (cpu): CPU time per payload byte at each end
                                       (serialization and copies)
    message_latency_s                  optional (cpu): delay the runtime adds to a message it
                                       receives, besides the link's latency (thread wake-ups,
                                       RPC dispatch); takes no CPU time
    step_overhead_s                    optional (cpu): CPU time a client's distributed
                                       Session.run spends per step besides its messages
    switch_cpu_share                   optional (cpu, at most 4): extra share of those
                                       per-event costs (and the per-op dispatch) a task pays
                                       when its host runs more processes than ``cores``: times
                                       1 + switch_cpu_share x (processes - cores) / cores
    switch_byte_cpu_share              optional (cpu, at most 4): the same for the CPU a
                                       message's bytes take (``message_overhead_s_per_byte`` and
                                       the loopback copies at both ends, the link's
                                       ``sender_cpu_share`` and ``receiver_cpu_share``): times
                                       1 + switch_byte_cpu_share x (processes - cores) / cores
    wake_overhead_s                    optional (cpu): CPU time of handing a blocked op (a queue
                                       dequeue, an accumulator take) back to its step's thread
                                       once another step's thread feeds it (a thread hand-off
                                       within a process); also what a message of one client's
                                       step pays when it finds its task busy with another's
                                       (handed the interpreter)
    description                        optional words

dtypes: float64, float32, tensorfloat32, float16, bfloat16, float8, int8.

Link fields (``kind`` is ``"pcie"``, ``"nvlink"``, ``"ethernet"``, ``"infiniband"``, ``"loopback"`` or
``"other"``): ``name``, ``kind``, ``bandwidth_bytes_per_s`` (per direction), ``latency_s``
(one-way, small message) required; ``links`` and ``per_link_bandwidth_bytes_per_s`` when the
bandwidth aggregates several physical links (NVLink: per-GPU aggregate = links x per-link);
``aggregate_bandwidth_bytes_per_s`` (loopback) the rate several concurrent streams between the
machine's tasks reach together (its cores copying them), ``bandwidth_bytes_per_s`` being one
stream's; ``sender_cpu_share`` and ``receiver_cpu_share`` (loopback) the CPU seconds the sending
and the receiving process spend per second a stream runs (the kernel's copies at each end; the
simulators book them on the machine's cores; without them, one core for the stream).

Host topologies (``hosts/<key>.toml``, ``kind = "host"``; ``load_host``, ``list_hosts``): how a
machine's GPUs, PCIe switches, CPU sockets, NVSwitches and NICs are wired, as groups of cables of
the link types above; the format is in ``hosts.py``, the shipped ones in ``hosts/README.md``.

Search order: the directories in ``HETBED_CATALOG_PATH`` (``os.pathsep``-separated), then the
shipped catalog. A directory may hold ``devices/``, ``links/`` and ``hosts/`` subfolders like the
shipped one, or flat ``<key>.toml`` files (device, link or host is then told by ``kind``).
``load_file(path)`` loads any single file. Validation errors are ``CatalogError`` naming the
file and the field path, e.g. ``v100.toml: peak_flops.float32: missing source``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10 needs the tomli backport
    import tomli as tomllib  # type: ignore[no-redef]

from .hosts import HostSpec, read_host

__all__ = [
    "CatalogError",
    "HardwareSpec",
    "LinkSpec",
    "HostSpec",
    "load_device",
    "load_link",
    "load_host",
    "load_file",
    "list_hosts",
    "list_devices",
    "list_links",
    "catalog_dirs",
]

BUILTIN_DIR = Path(__file__).resolve().parent
DEVICE_KINDS = ("cpu", "gpu", "tpu")
LINK_KINDS = ("pcie", "nvlink", "ethernet", "infiniband", "loopback", "other")
DTYPES = ("float64", "float32", "tensorfloat32", "float16", "bfloat16", "float8", "int8")
_QUANTITY_KEYS = {"value", "source", "note"}


class CatalogError(ValueError):
    """A catalog file is missing, malformed, or fails validation; the message names file and field."""


@dataclass(frozen=True)
class HardwareSpec:
    """One device (a CPU host, a GPU die, a TPU chip), as read from its TOML file."""

    key: str
    name: str
    kind: str
    peak_flops: dict[str, float] = field(hash=False)
    memory_bandwidth_bytes_per_s: float
    memory_bytes: int
    kernel_launch_overhead_s: float
    stream_bandwidth_bytes_per_s: float | None = None
    cache_bytes: int | None = None
    cache_bandwidth_bytes_per_s: float | None = None
    fresh_memory_threshold_bytes: int | None = None
    fresh_memory_s_per_byte: float | None = None
    matrix_peak_flops: dict[str, float] = field(default_factory=dict, hash=False)
    unaligned_matrix_peak_flops: dict[str, float] = field(default_factory=dict, hash=False)
    host_link: str | None = None
    peer_link: str | None = None
    network_link: str | None = None
    systolic_array_shape: tuple[int, int] | None = None
    matrix_units: int | None = None
    cores: int | None = None
    fp32_lanes: int | None = None
    multiprocessors: int | None = None
    warp_issue_per_clock: int | None = None
    tile_loads: str | None = None
    #: (dtype, algorithm names) pairs: the convolution algorithms per dtype (gpuconv.py)
    conv_algorithms: tuple[tuple[str, tuple[str, ...]], ...] | None = None
    clock_hz: float | None = None
    message_overhead_s: float | None = None
    message_overhead_s_per_byte: float | None = None
    step_overhead_s: float | None = None
    message_latency_s: float | None = None
    kernel_launch_overhead_clocked_s: float | None = None
    control_message_overhead_s: float | None = None
    own_control_message_overhead_s: float | None = None
    switch_cpu_share: float | None = None
    switch_byte_cpu_share: float | None = None
    wake_overhead_s: float | None = None
    description: str = ""
    sources: dict[str, str] = field(default_factory=dict, hash=False)
    notes: dict[str, str] = field(default_factory=dict, hash=False)
    path: str = ""

    @property
    def memory_rate(self) -> float:
        """Bytes a second a streaming kernel moves: the measured (or estimated) streaming rate
        where the catalog gives one, else the datasheet's bandwidth."""
        return self.stream_bandwidth_bytes_per_s or self.memory_bandwidth_bytes_per_s

    def peak(self, dtype: Any = "float32", matrix: bool = False) -> float:
        """Peak FLOP/s for ``dtype`` (a name or anything with ``.name``).

        With ``matrix=True`` the matrix-unit peak is returned when the device has one for that
        dtype, else the vector peak. Raises KeyError naming the dtypes the device does list.
        """
        name = getattr(dtype, "name", dtype)
        if matrix and name in self.matrix_peak_flops:
            return self.matrix_peak_flops[name]
        if name in self.peak_flops:
            return self.peak_flops[name]
        raise KeyError(
            f"{self.key} has no {'matrix ' if matrix else ''}peak for {name!r}; peak_flops has "
            f"{sorted(self.peak_flops)}, matrix_peak_flops has {sorted(self.matrix_peak_flops)}"
        )


@dataclass(frozen=True)
class LinkSpec:
    """One link type; ``bandwidth_bytes_per_s`` is per direction."""

    key: str
    name: str
    kind: str
    bandwidth_bytes_per_s: float
    latency_s: float
    links: int | None = None
    per_link_bandwidth_bytes_per_s: float | None = None
    #: (loopback) the rate concurrent streams between a machine's tasks reach together
    aggregate_bandwidth_bytes_per_s: float | None = None
    #: (loopback) CPU seconds per second of a stream at its sending and its receiving end
    sender_cpu_share: float | None = None
    receiver_cpu_share: float | None = None
    description: str = ""
    sources: dict[str, str] = field(default_factory=dict, hash=False)
    notes: dict[str, str] = field(default_factory=dict, hash=False)
    path: str = ""

    def transfer_time(self, nbytes: float) -> float:
        """Seconds to move ``nbytes`` one way on an idle link: latency + bytes / bandwidth."""
        return self.latency_s + nbytes / self.bandwidth_bytes_per_s

    def with_links(self, n: int) -> LinkSpec:
        """The same link type using ``n`` physical links (e.g. 2 of a V100's 6 NVLinks)."""
        if self.per_link_bandwidth_bytes_per_s is None:
            raise ValueError(f"link {self.key!r} has no per_link_bandwidth_bytes_per_s")
        if n < 1:
            raise ValueError(f"link count must be >= 1, got {n}")
        return replace(
            self,
            key=f"{self.key}_x{n}",
            name=f"{self.name}; {n} link(s) in use",
            links=n,
            bandwidth_bytes_per_s=n * self.per_link_bandwidth_bytes_per_s,
        )


# ---------------------------------------------------------------------------------------------
# lookup


def catalog_dirs() -> list[Path]:
    """Directories searched, first match wins: HETBED_CATALOG_PATH entries, then the shipped one."""
    extra = os.environ.get("HETBED_CATALOG_PATH", "")
    return [Path(p).expanduser() for p in extra.split(os.pathsep) if p] + [BUILTIN_DIR]


def _candidates(root: Path, sub: str) -> list[Path]:
    return sorted((root / sub).glob("*.toml")) + sorted(root.glob("*.toml"))


def _find(key: str, sub: str, want: type) -> HardwareSpec | LinkSpec | HostSpec:
    what = {HardwareSpec: "device", LinkSpec: "link", HostSpec: "host topology"}[want]
    for root in catalog_dirs():
        for path in (root / sub / f"{key}.toml", root / f"{key}.toml"):
            if path.is_file():
                spec = load_file(path)
                if not isinstance(spec, want):
                    raise CatalogError(f"{path.name}: kind {spec.kind!r} is not a {what} kind")
                return spec
    known = _list(sub, want)
    dirs = ", ".join(str(d) for d in catalog_dirs())
    raise CatalogError(
        f"unknown {what} {key!r}; the catalog has {known}. Add {key}.toml under one of: {dirs} "
        "(directories listed in HETBED_CATALOG_PATH are searched first)"
    )


def _list(sub: str, want: type) -> list[str]:
    kinds = {HardwareSpec: DEVICE_KINDS, LinkSpec: LINK_KINDS, HostSpec: ("host",)}[want]
    keys: set[str] = set()
    for root in catalog_dirs():
        for path in _candidates(root, sub):
            if path.parent == root / sub or _kind_of(path) in kinds:
                keys.add(path.stem)
    return sorted(keys)


def _kind_of(path: Path) -> str:
    """The ``kind`` of a flat-layout file, read without validating the rest (a host file names
    links, and listing links must not load it); CatalogError for a file without a known kind."""
    try:
        with open(path, "rb") as f:
            kind = tomllib.load(f).get("kind")
    except (OSError, tomllib.TOMLDecodeError):
        kind = None
    kind = kind.get("value") if isinstance(kind, dict) else kind
    if kind in DEVICE_KINDS + LINK_KINDS + ("host",):
        return kind
    return load_file(path).kind  # raises the CatalogError naming the problem


def entry_file(key: str, sub: str) -> Path | None:
    """The file an entry ``key`` of ``sub`` ("devices", "links", "hosts") is read from: the
    first in the search path (``catalog_dirs``); None where there is none."""
    for root in catalog_dirs():
        for path in (root / sub / f"{key}.toml", root / f"{key}.toml"):
            if path.is_file():
                return path
    return None


def provenance(entries: dict[str, tuple[str, str]]) -> dict[str, dict]:
    """Where each entry used comes from, for a results manifest: ``entries`` maps a label (a
    scenario field) to (key, sub); each gets its file, whether it is the shipped one, whether it
    shadows a shipped entry of the same key, and its SHA-256."""
    import hashlib

    out = {}
    for label, (key, sub) in entries.items():
        path = entry_file(key, sub) if key else None
        if path is None:
            continue
        builtin = path.resolve().is_relative_to(BUILTIN_DIR)
        shipped = (BUILTIN_DIR / sub / f"{key}.toml").is_file()
        out[label] = {
            "key": key,
            "file": str(path),
            "builtin": builtin,
            "shadows_builtin": not builtin and shipped,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        }
    return out


def load_device(key: str) -> HardwareSpec:
    """The device spec named ``key`` (a file stem, e.g. ``"v100_sxm2"``); CatalogError if unknown."""
    return _find(key, "devices", HardwareSpec)  # type: ignore[return-value]


def load_link(key: str) -> LinkSpec:
    """The link spec named ``key`` (a file stem, e.g. ``"pcie3_x16"``); CatalogError if unknown."""
    return _find(key, "links", LinkSpec)  # type: ignore[return-value]


def load_host(key: str) -> HostSpec:
    """The host topology named ``key`` (a file stem, e.g. ``"dgx1_v100"``); CatalogError if
    unknown or invalid."""
    return _find(key, "hosts", HostSpec)  # type: ignore[return-value]


def list_devices() -> list[str]:
    """Keys of every device in the search path, sorted."""
    return _list("devices", HardwareSpec)


def list_links() -> list[str]:
    """Keys of every link in the search path, sorted."""
    return _list("links", LinkSpec)


def list_hosts() -> list[str]:
    """Keys of every host topology in the search path, sorted."""
    return _list("hosts", HostSpec)


# ---------------------------------------------------------------------------------------------
# parsing and validation


def load_file(path: str | os.PathLike) -> HardwareSpec | LinkSpec | HostSpec:
    """Parse and validate one TOML file; a device, a link or a host according to its ``kind``."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        raise CatalogError(f"{path}: no such catalog file") from None
    except tomllib.TOMLDecodeError as e:
        raise CatalogError(f"{path.name}: invalid TOML: {e}") from None
    r = _Reader(path, doc)
    kind = r.word("kind")
    if kind in DEVICE_KINDS:
        return _device(r, kind)
    if kind in LINK_KINDS:
        return _link(r, kind)
    if kind == "host":
        return read_host(r)
    raise r.error(
        "kind",
        f"unknown kind {kind!r}; devices: {DEVICE_KINDS}, links: {LINK_KINDS}, host topologies: "
        "'host'",
    )


class _Reader:
    """Reads fields of one parsed file, recording sources and notes by field path."""

    def __init__(self, path: Path, doc: dict, prefix: str = ""):
        self.path, self.doc, self.prefix = path, doc, prefix
        self.sources: dict[str, str] = {}
        self.notes: dict[str, str] = {}

    def sub(self, doc: dict, prefix: str) -> _Reader:
        """A reader of the table ``doc`` at ``prefix`` (``links[2]``), sharing sources and notes."""
        r = _Reader(self.path, doc, f"{self.prefix}{prefix}.")
        r.sources, r.notes = self.sources, self.notes
        return r

    def error(self, fpath: str, msg: str) -> CatalogError:
        return CatalogError(f"{self.path.name}: {self.prefix}{fpath}: {msg}")

    def _get(self, fpath: str, required: bool) -> Any:
        node: Any = self.doc
        for part in fpath.split("."):
            if not isinstance(node, dict) or part not in node:
                if required:
                    raise self.error(fpath, "missing required field")
                return None
            node = node[part]
        return node

    def _sourced(self, fpath: str, raw: Any, words: bool) -> Any:
        """Unwrap ``{value, source, note}``; bare values are allowed only for words."""
        if not isinstance(raw, dict):
            if words:
                return raw
            if isinstance(raw, (int, float)) and not isinstance(raw, bool):
                hint = f'{{ value = {raw!r}, source = "datasheet (year)" }}'
                raise self.error(fpath, f"missing source: write {hint}")
            raise self.error(fpath, f"expected {{ value = <number>, source = ... }}, got {raw!r}")
        unknown = set(raw) - _QUANTITY_KEYS
        if unknown:
            raise self.error(fpath, f"unknown key(s) {sorted(unknown)}; use value, source, note")
        if "value" not in raw:
            raise self.error(fpath, "missing value")
        source = raw.get("source")
        if not isinstance(source, str) or not source.strip():
            raise self.error(fpath, "missing source")
        self.sources[self.prefix + fpath] = source.strip()
        note = raw.get("note")
        if note is not None:
            if not isinstance(note, str):
                raise self.error(fpath, f"note must be a string, got {note!r}")
            self.notes[self.prefix + fpath] = note.strip()
        return raw["value"]

    def word(self, fpath: str, required: bool = True) -> str | None:
        raw = self._get(fpath, required)
        if raw is None:
            return None
        value = self._sourced(fpath, raw, words=True)
        if not isinstance(value, str) or not value.strip():
            raise self.error(fpath, f"expected a non-empty string, got {value!r}")
        return value.strip()

    def number(self, fpath: str, required: bool = True, integer: bool = False) -> Any:
        raw = self._get(fpath, required)
        if raw is None:
            return None
        return self._positive(fpath, self._sourced(fpath, raw, words=False), integer)

    def _positive(self, fpath: str, value: Any, integer: bool) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(fpath, f"expected a number, got {value!r}")
        if not math.isfinite(value) or value <= 0:
            raise self.error(fpath, f"must be finite and positive, got {value:g}")
        if integer:
            if value != int(value):
                raise self.error(fpath, f"expected a whole number, got {value!r}")
            return int(value)
        return float(value)

    def per_dtype(self, fpath: str, required: bool) -> dict[str, float]:
        table = self._get(fpath, required)
        if table is None:
            return {}
        if not isinstance(table, dict) or not table or "value" in table:
            raise self.error(fpath, "expected a table of dtype = { value, source }, e.g. float32")
        out = {}
        for dtype in table:
            if dtype not in DTYPES:
                raise self.error(f"{fpath}.{dtype}", f"unknown dtype; known: {', '.join(DTYPES)}")
            out[dtype] = self.number(f"{fpath}.{dtype}")
        return out

    def conv_algorithms(self, fpath: str) -> tuple[tuple[str, tuple[str, ...]], ...] | None:
        """An optional table of dtype = { value = [algorithm, ...], source }: which convolution
        algorithms a GPU's library runs per dtype (``gpuconv.ALGORITHMS``, each may be limited
        to one pass by ``name:pass``); implicit GEMM must be among them."""
        from ..gpuconv import ALGORITHMS, PASSES

        table = self._get(fpath, False)
        if table is None:
            return None
        if not isinstance(table, dict) or not table or "value" in table:
            raise self.error(
                fpath, 'expected a table of dtype = { value = ["implicit_gemm"], source }'
            )
        out = []
        for dtype, raw in table.items():
            where = f"{fpath}.{dtype}"
            if dtype not in DTYPES:
                raise self.error(where, f"unknown dtype; known: {', '.join(DTYPES)}")
            if not isinstance(raw, dict):
                raise self.error(where, 'expected { value = ["implicit_gemm", ...], source = ... }')
            names = self._sourced(where, raw, words=False)
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise self.error(where, f"expected a list of algorithm names, got {names!r}")
            for name in names:
                algo, _, pass_ = name.partition(":")
                if algo not in ALGORITHMS or (pass_ and pass_ not in PASSES):
                    raise self.error(
                        where,
                        f"unknown algorithm {name!r}; known: {', '.join(ALGORITHMS)}, each "
                        f"optionally as name:pass with pass one of {', '.join(PASSES)}",
                    )
            if "implicit_gemm" not in names:
                raise self.error(where, "implicit_gemm must be listed (every pass, every shape)")
            out.append((dtype, tuple(names)))
        return tuple(out)

    def shape(self, fpath: str, required: bool) -> tuple[int, int] | None:
        raw = self._get(fpath, required)
        if raw is None:
            return None
        value = self._sourced(fpath, raw, words=False)
        if not isinstance(value, list) or len(value) != 2:
            raise self.error(fpath, f"expected [rows, cols], got {value!r}")
        rows, cols = (self._positive(fpath, v, integer=True) for v in value)
        return (rows, cols)

    def finish(self, allowed: set[str]) -> None:
        unknown = set(self.doc) - allowed
        if unknown:
            name = sorted(unknown)[0]
            raise self.error(name, f"unknown field; known: {', '.join(sorted(allowed))}")


_DEVICE_FIELDS = set(
    "name kind description peak_flops matrix_peak_flops memory_bandwidth_bytes_per_s memory_bytes"
    " stream_bandwidth_bytes_per_s unaligned_matrix_peak_flops"
    " kernel_launch_overhead_s cache_bytes cache_bandwidth_bytes_per_s fresh_memory_threshold_bytes fresh_memory_s_per_byte host_link peer_link network_link systolic_array_shape matrix_units"
    " cores fp32_lanes multiprocessors warp_issue_per_clock tile_loads conv_algorithms clock_hz message_overhead_s message_overhead_s_per_byte step_overhead_s message_latency_s kernel_launch_overhead_clocked_s control_message_overhead_s"
    " own_control_message_overhead_s"
    " switch_cpu_share switch_byte_cpu_share wake_overhead_s".split()
)
_LINK_FIELDS = set(
    "name kind description bandwidth_bytes_per_s latency_s links per_link_bandwidth_bytes_per_s"
    " aggregate_bandwidth_bytes_per_s sender_cpu_share receiver_cpu_share".split()
)


def _device(r: _Reader, kind: str) -> HardwareSpec:
    tpu, accel = kind == "tpu", kind in ("gpu", "tpu")
    spec = HardwareSpec(
        key=r.path.stem,
        name=r.word("name"),
        kind=kind,
        description=r.word("description", required=False) or "",
        peak_flops=r.per_dtype("peak_flops", required=True),
        matrix_peak_flops=r.per_dtype("matrix_peak_flops", required=tpu),
        unaligned_matrix_peak_flops=r.per_dtype("unaligned_matrix_peak_flops", required=False),
        memory_bandwidth_bytes_per_s=r.number("memory_bandwidth_bytes_per_s"),
        stream_bandwidth_bytes_per_s=r.number("stream_bandwidth_bytes_per_s", required=False),
        memory_bytes=r.number("memory_bytes", integer=True),
        kernel_launch_overhead_s=r.number("kernel_launch_overhead_s"),
        cache_bytes=r.number("cache_bytes", required=False, integer=True),
        cache_bandwidth_bytes_per_s=r.number("cache_bandwidth_bytes_per_s", required=False),
        fresh_memory_threshold_bytes=r.number(
            "fresh_memory_threshold_bytes", required=False, integer=True
        ),
        fresh_memory_s_per_byte=r.number("fresh_memory_s_per_byte", required=False),
        host_link=r.word("host_link", required=accel),
        peer_link=r.word("peer_link", required=False),
        network_link=r.word("network_link", required=False),
        systolic_array_shape=r.shape("systolic_array_shape", required=tpu),
        matrix_units=r.number("matrix_units", required=tpu, integer=True),
        cores=r.number("cores", required=False, integer=True),
        fp32_lanes=r.number("fp32_lanes", required=False, integer=True),
        multiprocessors=r.number("multiprocessors", required=False, integer=True),
        warp_issue_per_clock=r.number("warp_issue_per_clock", required=False, integer=True),
        tile_loads=r.word("tile_loads", required=False),
        conv_algorithms=r.conv_algorithms("conv_algorithms"),
        clock_hz=r.number("clock_hz", required=False),
        message_overhead_s=r.number("message_overhead_s", required=False),
        message_overhead_s_per_byte=r.number("message_overhead_s_per_byte", required=False),
        step_overhead_s=r.number("step_overhead_s", required=False),
        message_latency_s=r.number("message_latency_s", required=False),
        kernel_launch_overhead_clocked_s=r.number(
            "kernel_launch_overhead_clocked_s", required=False
        ),
        control_message_overhead_s=r.number("control_message_overhead_s", required=False),
        own_control_message_overhead_s=r.number("own_control_message_overhead_s", required=False),
        switch_cpu_share=r.number("switch_cpu_share", required=False),
        switch_byte_cpu_share=r.number("switch_byte_cpu_share", required=False),
        wake_overhead_s=r.number("wake_overhead_s", required=False),
        sources=r.sources,
        notes=r.notes,
        path=str(r.path),
    )
    stream = spec.stream_bandwidth_bytes_per_s
    if stream is not None and stream > spec.memory_bandwidth_bytes_per_s:
        raise r.error(
            "stream_bandwidth_bytes_per_s",
            f"{stream:g} B/s is above memory_bandwidth_bytes_per_s "
            f"({spec.memory_bandwidth_bytes_per_s:g}): a streaming kernel cannot beat the peak",
        )
    for name in ("switch_cpu_share", "switch_byte_cpu_share"):
        share = getattr(spec, name)
        if share is not None and share > 4.0:
            raise r.error(name, f"must be at most 4, got {share:g}")
    if (spec.cache_bytes is None) != (spec.cache_bandwidth_bytes_per_s is None):
        name = "cache_bytes" if spec.cache_bytes is None else "cache_bandwidth_bytes_per_s"
        raise r.error(name, "cache_bytes and cache_bandwidth_bytes_per_s go together")
    if (spec.fresh_memory_threshold_bytes is None) != (spec.fresh_memory_s_per_byte is None):
        name = (
            "fresh_memory_threshold_bytes"
            if spec.fresh_memory_threshold_bytes is None
            else "fresh_memory_s_per_byte"
        )
        raise r.error(name, "fresh_memory_threshold_bytes and fresh_memory_s_per_byte go together")
    if spec.tile_loads not in (None, "tma", "threads"):
        raise r.error("tile_loads", f'expected "tma" or "threads", got {spec.tile_loads!r}')
    for dtype, rate in spec.unaligned_matrix_peak_flops.items():
        where = f"unaligned_matrix_peak_flops.{dtype}"
        if spec.tile_loads != "tma":
            raise r.error(where, 'only a GPU whose tile_loads is "tma" runs other kernels there')
        if dtype not in spec.matrix_peak_flops:
            raise r.error(where, "no matrix_peak_flops for this dtype")
        if rate > spec.matrix_peak_flops[dtype]:
            raise r.error(
                where,
                f"{rate:g} FLOP/s is above matrix_peak_flops.{dtype} "
                f"({spec.matrix_peak_flops[dtype]:g})",
            )
    r.finish(_DEVICE_FIELDS)
    return spec


def _link(r: _Reader, kind: str) -> LinkSpec:
    spec = LinkSpec(
        key=r.path.stem,
        name=r.word("name"),
        kind=kind,
        description=r.word("description", required=False) or "",
        bandwidth_bytes_per_s=r.number("bandwidth_bytes_per_s"),
        latency_s=r.number("latency_s"),
        links=r.number("links", required=False, integer=True),
        per_link_bandwidth_bytes_per_s=r.number("per_link_bandwidth_bytes_per_s", required=False),
        aggregate_bandwidth_bytes_per_s=r.number("aggregate_bandwidth_bytes_per_s", required=False),
        sender_cpu_share=r.number("sender_cpu_share", required=False),
        receiver_cpu_share=r.number("receiver_cpu_share", required=False),
        sources=r.sources,
        notes=r.notes,
        path=str(r.path),
    )
    r.finish(_LINK_FIELDS)
    for name in ("sender_cpu_share", "receiver_cpu_share"):
        v = getattr(spec, name)
        if v is not None and v > 1.0:
            raise r.error(
                name, f"a stream's end is one thread: at most 1 CPU second per second, got {v:g}"
            )
    if spec.links is not None and spec.per_link_bandwidth_bytes_per_s is not None:
        total = spec.links * spec.per_link_bandwidth_bytes_per_s
        if not math.isclose(total, spec.bandwidth_bytes_per_s, rel_tol=0.01):
            raise r.error(
                "bandwidth_bytes_per_s",
                f"{spec.bandwidth_bytes_per_s:g} differs from links x per_link_bandwidth_bytes_per_s"
                f" = {spec.links} x {spec.per_link_bandwidth_bytes_per_s:g} = {total:g}",
            )
    return spec
