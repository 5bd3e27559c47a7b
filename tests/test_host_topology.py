"""Intra-host GPU topologies (issue 19, item 4): catalog host files, routing on them, and flows
sharing their links, against closed forms."""

from __future__ import annotations

import itertools
import json
import math
import sys

import numpy as np
import pytest
import simpy

from hetbed.cli import main
from hetbed.devices import catalog
from hetbed.devices.catalog import CatalogError
from hetbed.scenarios.schema import ScenarioError, load
from hetbed.simulator import Cluster
from hetbed.simulator.network import Network
from hetbed.simulator.topology import SwitchFabric

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PCIE3 = 15.75e9  # pcie3_x16, bytes/s per direction
NV2 = 25e9  # one NVLink 2.0 link, per direction
B = 8e6  # bytes per flow


@pytest.fixture(autouse=True)
def _no_user_catalog(monkeypatch):
    monkeypatch.delenv("HETBED_CATALOG_PATH", raising=False)


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9)


def _host(key):
    """A fabric with one host built as ``key``, GPU i as device ``g<i>``, a CPU as ``cpu``."""
    net = Network(simpy.Environment())
    fabric = SwitchFabric(net, {"h": (12.5e9, 0.0)})
    spec = catalog.load_host(key) if isinstance(key, str) else key
    host = fabric.attach_topology("h", spec)
    for i in range(spec.gpus):
        host.add_device(f"g{i}", f"gpu{i}")
    host.add_memory_device("cpu")
    return fabric, host


def _run(fabric, pairs, nbytes=B):
    """Start one flow per (src, dst) device pair at t=0; returns each flow's end time."""
    net = fabric.network
    ends = {}
    for s, d in pairs:
        path = fabric.route_devices(f"h/{s}", f"h/{d}")
        net.transfer(path, nbytes, on_done=lambda r, k=(s, d): ends.__setitem__(k, r["end_s"]))
    net.env.run()
    return ends


def _lat(path):
    return sum(x.latency_s for x in path)


def _names(path):
    return [x.name.removeprefix("h/") for x in path]


# -- catalog -------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", catalog.list_hosts())
def test_every_shipped_host_loads_and_every_number_has_a_source(key):
    """Each host file loads; every number in it is a {value, source} table."""
    spec = catalog.load_host(key)
    assert spec.kind == "host" and spec.memory_node == "cpu0" and "gpus" in spec.sources
    with open(spec.path, "rb") as f:
        doc = tomllib.load(f)

    def walk(node, path):
        if isinstance(node, dict):
            if "value" in node:
                assert isinstance(node.get("source"), str) and node["source"], path
                return
            for k, v in node.items():
                walk(v, f"{path}.{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]")
        else:
            assert not isinstance(node, (int, float)) or isinstance(node, bool), path

    walk(doc, key)
    assert all(isinstance(g.get("source"), str) for g in doc["links"])


def test_dgx1_cube_mesh_has_six_nvlinks_per_gpu_and_twelve_pairs_without():
    """DGX-1 V100: 6 NVLinks per GPU, 8 doubled pairs and 8 single ones; each quad (0-3, 4-7)
    fully connected; the 12 pairs without an NVLink all join the two quads."""
    spec = catalog.load_host("dgx1_v100")
    nv = {frozenset((w.a, w.b)): w.count for w in spec.wires if w.link.kind == "nvlink"}
    per_gpu = {g: sum(c for p, c in nv.items() if g in p) for g in spec.gpu_nodes()}
    assert per_gpu == dict.fromkeys(spec.gpu_nodes(), 6)
    assert sorted(nv.values()) == [1] * 8 + [2] * 8
    quads = [{f"gpu{i}" for i in range(4)}, {f"gpu{i}" for i in range(4, 8)}]
    for q in quads:  # each quad fully connected
        assert all(frozenset(p) in nv for p in itertools.combinations(sorted(q), 2))
    missing = [p for p in itertools.combinations(spec.gpu_nodes(), 2) if frozenset(p) not in nv]
    assert len(missing) == 12 and all((set(p) & quads[0]) and (set(p) & quads[1]) for p in missing)


def test_nvswitch_host_joins_every_gpu_to_the_switch_at_full_nvlink_bandwidth():
    """DGX A100: each GPU has one cable to the NVSwitch of 12 NVLink 3.0 links = 300e9 B/s."""
    spec = catalog.load_host("dgx_a100")
    nv = [w for w in spec.wires if "nvsw" in (w.a, w.b)]
    assert sorted(w.a for w in nv) == spec.gpu_nodes()
    assert {(w.count, w.link.bandwidth_bytes_per_s) for w in nv} == {(12, 300e9)}


HOST = """\
name = "test host"
kind = "host"
gpus = { value = 2, source = "test" }

[nodes]
cpu0 = "socket"
sw = "pcie_switch"

[[links]]
link = "pcie3_x16"
pairs = [["gpu0", "sw"], ["gpu1", "sw"], ["sw", "cpu0"]]
source = "test"
"""


@pytest.mark.parametrize(
    "old, new, message",
    [
        ('["gpu1", "sw"]', '["gpu9", "sw"]', r"links\[0\]\.pairs\[1\]: unknown node 'gpu9'"),
        ('source = "test"\n', "", r"links\[0\]\.source: missing required field"),
        ('link = "pcie3_x16"', 'link = "pcie9"', r"links\[0\]\.link: unknown link 'pcie9'"),
        (
            'link = "pcie3_x16"',
            'link = "pcie3_x16"\ncount = { value = 2, source = "x" }',
            r"links\[0\]\.count: link 'pcie3_x16' has no per_link_bandwidth",
        ),
        ('pairs = [["gpu0"', 'count = 2\npairs = [["gpu0"', r"links\[0\]\.count: missing source"),
        ('sw = "pcie_switch"', 'sw = "plx"', r"nodes\.sw: unknown node kind 'plx'"),
        ('cpu0 = "socket"', 'cpu0 = "pcie_switch"', r"nodes: a host needs at least one socket"),
        (', ["sw", "cpu0"]', "", r"links: gpu0, gpu1 cannot reach host memory"),
        ('["gpu1", "sw"]', '["gpu1", "gpu0"]', r"links: gpu1 cannot reach host memory"),
        ('["gpu1", "sw"]', '["sw", "gpu0"]', r"links\[0\]\.pairs\[1\]: .* listed twice"),
        ("gpus = { value = 2,", "gpus = { value = 0,", r"gpus: must be finite and positive, got 0"),
        ('kind = "host"', 'kind = "host"\nwires = 1', r"wires: unknown field"),
        ('kind = "host"', 'kind = "host"\ngpu = "v100"', r"gpu: unknown device 'v100'"),
        ('kind = "host"', 'kind = "host"\ngpu = "tpu_v3"', r"gpu: 'tpu_v3' is a tpu, not a gpu"),
    ],
)
def test_bad_host_files_name_file_and_field_path(tmp_path, monkeypatch, old, new, message):
    """A bad host file raises CatalogError naming the file and the field path."""
    assert old in HOST
    (tmp_path / "myhost.toml").write_text(HOST.replace(old, new))
    monkeypatch.setenv("HETBED_CATALOG_PATH", str(tmp_path))
    with pytest.raises(CatalogError, match=r"myhost\.toml: " + message):
        catalog.load_host("myhost")


def test_cli_lists_and_shows_host_topologies(capsys):
    """`hetbed catalog` lists the host topologies; one shows its cables and their sources."""
    assert main(["catalog", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["hosts"]) == set(catalog.list_hosts())
    assert main(["catalog", "dgx1_v100", "--json"]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert "gpu0 <-> gpu3: nvlink2_x2 50 GB/s" in entry["spec"]["wires"]
    assert "WP-08437-002" in entry["sources"]["links[0]"]
    assert "WP-08437-002" in entry["sources"]["links[0].count"]


def test_unknown_host_topology_lists_the_catalog():
    with pytest.raises(CatalogError, match=r"unknown host topology 'dgx9'.*dgx1_v100"):
        catalog.load_host("dgx9")


# -- routing and contention ----------------------------------------------------------------------


def test_pcie_tree_routes_stay_as_low_as_the_tree_allows():
    """Same switch: GPU -> switch -> GPU; same socket: up to the root complex and down; across
    sockets: across QPI. A route's latency is the sum of its links'."""
    fabric, h = _host("pcie_2s_plx2_8gpu")
    assert _names(h.route("g0", "g1")) == ["gpu0->plx0:pcie3_x16", "plx0->gpu1:pcie3_x16"]
    assert [x.split(":")[0] for x in _names(h.route("g0", "g3"))] == [
        "gpu0->plx0",
        "plx0->cpu0",
        "cpu0->plx1",
        "plx1->gpu3",
    ]
    across = h.route("g1", "g6")
    assert [x.split(":")[0] for x in _names(across)] == [
        "gpu1->plx0",
        "plx0->cpu0",
        "cpu0->cpu1",
        "cpu1->plx3",
        "plx3->gpu6",
    ]
    assert close(_lat(across), 4 * 1e-6 + 1e-7)
    assert _names(h.route("cpu", "g2")) == ["cpu0->plx1:pcie3_x16", "plx1->gpu2:pcie3_x16"]
    assert h.up("g7") == h.route("g7", "cpu") and h.down("g7") == h.route("cpu", "g7")
    ends = _run(fabric, [("g1", "g6")])
    assert close(ends["g1", "g6"], _lat(across) + B / PCIE3)


def test_pcie_pairs_on_different_switches_run_at_full_rate_and_share_a_switch_uplink():
    """Two pairs each within its own switch: both at the full x16 rate. Two pairs leaving one
    switch (gpu0->gpu2, gpu1->gpu3) share its uplink: each at half of it."""
    fabric, _ = _host("pcie_2s_plx2_8gpu")
    ends = _run(fabric, [("g0", "g1"), ("g2", "g3")])
    assert close(ends["g0", "g1"], 2e-6 + B / PCIE3) and close(ends["g2", "g3"], 2e-6 + B / PCIE3)
    fabric, _ = _host("pcie_2s_plx2_8gpu")
    ends = _run(fabric, [("g0", "g2"), ("g1", "g3")])
    for k in ends:
        assert close(ends[k], 4e-6 + B / (PCIE3 / 2))


def test_four_gpus_behind_one_switch_share_its_uplink_four_ways():
    """PEX 8796 tree: gpu i -> gpu i+4 for i < 4 all cross plx0's uplink: each at a quarter."""
    fabric, _ = _host("pcie_2s_plx4_8gpu")
    ends = _run(fabric, [(f"g{i}", f"g{i + 4}") for i in range(4)])
    assert len(ends) == 4
    for k in ends:
        assert close(ends[k], 4e-6 + 1e-7 + B / (PCIE3 / 4))


def test_two_pairs_crossing_one_socket_link_share_it(tmp_path, monkeypatch):
    """With a socket link narrower than PCIe (10e9 B/s), two cross-socket pairs from different
    switches each get half of it; a pair within a switch keeps the full PCIe rate."""
    link = 'name = "slow socket link"\nkind = "other"\n'
    link += 'bandwidth_bytes_per_s = { value = 10e9, source = "test" }\n'
    link += 'latency_s = { value = 2e-7, source = "test" }\n'
    (tmp_path / "slow_socket.toml").write_text(link)
    src = catalog.load_host("pcie_2s_plx2_8gpu").path
    text = open(src).read().replace('link = "qpi_9_6gt"', 'link = "slow_socket"')
    (tmp_path / "slow_tree.toml").write_text(text)
    monkeypatch.setenv("HETBED_CATALOG_PATH", str(tmp_path))
    fabric, _ = _host("slow_tree")
    ends = _run(fabric, [("g0", "g4"), ("g2", "g6"), ("g1", "g0")])
    for k in (("g0", "g4"), ("g2", "g6")):
        assert close(ends[k], 4e-6 + 2e-7 + B / 5e9)
    assert close(ends["g1", "g0"], 2e-6 + B / PCIE3)


def test_dgx1_two_nvlinks_carry_twice_one_and_unlinked_pairs_go_through_pcie():
    """DGX-1: gpu0->gpu3 (2 NVLinks) at 50e9, gpu0->gpu1 (1 NVLink) at 25e9, concurrently;
    gpu0->gpu5 (no NVLink) over PCIe and QPI at the x16 rate, never through another GPU."""
    fabric, h = _host("dgx1_v100")
    assert _names(h.route("g0", "g3")) == ["gpu0->gpu3:nvlink2_x2"]
    assert _names(h.route("g1", "g0")) == ["gpu1->gpu0:nvlink2_x1"]
    via = _names(h.route("g0", "g5"))
    assert [x.split(":")[0] for x in via] == [
        "gpu0->plx0",
        "plx0->cpu0",
        "cpu0->cpu1",
        "cpu1->plx2",
        "plx2->gpu5",
    ]
    ends = _run(fabric, [("g0", "g3"), ("g0", "g1"), ("g0", "g5")])
    t2, t1 = ends["g0", "g3"] - 1e-6, ends["g0", "g1"] - 1e-6
    assert close(t2, B / (2 * NV2)) and close(t1, B / NV2) and close(t1, 2 * t2)
    assert close(ends["g0", "g5"], 4e-6 + 1e-7 + B / PCIE3)


def test_dgx1_network_leaves_through_the_nearest_nic():
    """A DGX-1 GPU reaches the network through the NIC on its own PLX switch; the CPU through
    the first NIC of its socket; across hosts the fabric's NIC links follow."""
    _, h = _host("dgx1_v100")
    assert _names(h.up("g5")) == ["gpu5->plx2:pcie3_x16", "plx2->nic2:pcie3_x16"]
    assert _names(h.down("g3")) == ["nic1->plx1:pcie3_x16", "plx1->gpu3:pcie3_x16"]
    assert _names(h.up("cpu")) == ["cpu0->plx0:pcie3_x16", "plx0->nic0:pcie3_x16"]


@pytest.mark.parametrize("key, rate", [("dgx_a100", 300e9), ("dgx_h100", 450e9)])
def test_nvswitch_runs_every_permutation_at_full_rate(key, rate):
    """DGX A100 (H100): every ordered GPU pair routes gpu -> NVSwitch -> gpu, so any permutation
    uses each GPU's up and down cable once; three permutations, simulated, all end at
    L + B/(12 NVLink3 = 300e9, 18 NVLink4 = 450e9)."""
    _, h = _host(key)
    for a, b in itertools.permutations(range(8), 2):
        assert [x.split(":")[0] for x in _names(h.route(f"g{a}", f"g{b}"))] == [
            f"gpu{a}->nvsw",
            f"nvsw->gpu{b}",
        ]
    perms = [np.roll(np.arange(8), 1), np.arange(8)[::-1], [3, 7, 0, 5, 1, 6, 4, 2]]
    for perm in perms:
        fabric, _ = _host(key)
        pairs = [(f"g{i}", f"g{int(j)}") for i, j in enumerate(perm)]
        ends = _run(fabric, pairs)
        assert len(ends) == 8
        for k in ends:
            assert close(ends[k], 2e-6 + B / rate)


def test_topology_host_rejects_plain_links_and_bad_nodes():
    _, h = _host("dgx1_v100")
    with pytest.raises(ValueError, match="links come from the topology"):
        h.add_device_link("x", 1e9)
    with pytest.raises(ValueError, match="not from add_peer_link"):
        h.add_peer_link("g0", "g1", 1e9)
    with pytest.raises(ValueError, match=r"no GPU node 'plx0'"):
        h.add_device("x", "plx0")
    with pytest.raises(ValueError, match=r"GPU node 'gpu1' already holds a device"):
        h.add_device("x", "gpu1")
    with pytest.raises(KeyError, match=r"unknown device 'g9'"):
        h.route("g0", "g9")


# -- the cluster and scenarios -------------------------------------------------------------------


def test_cluster_builds_tasks_as_a_named_topology_and_keeps_the_plain_host_by_default():
    """Cluster(host_topology=...) builds every task with GPUs as the topology; a task may name
    another (and then gets the topology's own GPUs by default); a task without GPUs, or any task
    of a cluster without a topology, keeps the plain host (PCIe links to host memory)."""
    c = Cluster(host_topology="pcie_2s_plx4_8gpu")
    w = c.add_task("worker", 0, host_topology="dgx1_v100")
    p = c.add_task("worker", 1, gpu=("k40", 2))
    ps = c.add_task("ps", 0)
    plain = Cluster()
    q = plain.add_task("worker", 0, gpu=("v100_sxm2", 2), peer_link="nvlink2")
    assert [d["hardware"] for d in c.describe()[:3]] == ["xeon_e5_2680v3_2s"] + ["v100_sxm2"] * 2
    assert len(c.task_devices(w)) == 9 and len(c.task_devices(p)) == 3
    assert len(c.task_devices(ps)) == 1
    assert [x.name for x in c.route(f"{ps}/device:cpu:0", f"{p}/device:gpu:1")] == [
        f"{ps}:nic:up",
        f"{p}:nic:down",
        f"{p}/cpu0->plx0:pcie3_x16",
        f"{p}/plx0->gpu1:pcie3_x16",
    ]
    r = c.route(f"{w}/device:gpu:2", f"{w}/device:gpu:1")
    assert [x.name for x in r] == [f"{w}/gpu2->gpu1:nvlink2_x2"]
    assert close(r[0].bandwidth_bytes_per_s, 50e9)
    r = c.route(f"{p}/device:gpu:0", f"{p}/device:gpu:1")
    assert [x.name.split(":")[-2].split("/")[-1] for x in r] == ["gpu0->plx0", "plx0->gpu1"]
    assert [x.name for x in plain.route(f"{q}/device:gpu:0", f"{q}/device:gpu:1")] == [
        f"{q}/device:gpu:0:peer:device:gpu:1"
    ]
    across = c.route(f"{w}/device:gpu:5", f"{p}/device:gpu:1")
    assert [x.name.removeprefix(w).removeprefix(p) for x in across] == [
        "/gpu5->plx2:pcie3_x16",
        "/plx2->nic2:pcie3_x16",
        ":nic:up",
        ":nic:down",
        "/cpu0->plx0:pcie3_x16",
        "/plx0->gpu1:pcie3_x16",
    ]
    assert close(sum(x.latency_s for x in across), 4e-6 + 25e-6)


def test_cluster_topology_errors_name_the_problem():
    c = Cluster()
    with pytest.raises(CatalogError, match=r"unknown host topology 'dgx_9'.*dgx_a100"):
        c.add_task("worker", 0, host_topology="dgx_9")
    with pytest.raises(ValueError, match=r"'dgx1_v100' has 8 GPUs, asked for 9"):
        c.add_task("worker", 0, gpu=("v100_sxm2", 9), host_topology="dgx1_v100")
    with pytest.raises(ValueError, match=r"wires them itself; drop peer_link="):
        c.add_task("worker", 0, gpu=("v100_sxm2", 2), peer_link="nvlink2", host_topology="dgx_a100")
    with pytest.raises(ValueError, match=r"wires them itself; drop tpu="):
        c.add_task("worker", 0, tpu=("tpu_v3", 1), host_topology="dgx_a100")
    with pytest.raises(CatalogError, match=r"unknown host topology 'nope'"):
        Cluster(host_topology="nope")


SCENARIO = """
[scenario]
name = "topology"

[model]
name = "mlp"
batch_size = 64
compute_s = 0.5

[cluster]
workers = 2
ps = 1
worker_device = "v100_sxm2"
"""


@pytest.mark.parametrize(
    "extra, message",
    [
        ('host_topology = "dgx1_v10"', r"cluster\.host_topology: no catalog entry 'dgx1_v10' "),
        ("host_topology = 3", r"cluster\.host_topology: expected a string, got 3"),
        (
            'host_topology = "dgx1_v100"\nworker_device = "tpu_v3"',
            r"cluster\.host_topology: 'dgx1_v100' places GPUs, .* 'tpu_v3' is a tpu",
        ),
    ],
)
def test_scenario_host_topology_errors_name_the_field_path(tmp_path, extra, message):
    p = tmp_path / "study.toml"
    p.write_text(SCENARIO.replace('worker_device = "v100_sxm2"', "") + extra + "\n")
    with pytest.raises(ScenarioError, match=r"study\.toml: " + message):
        load(str(p))


def test_scenario_names_a_host_topology(tmp_path):
    """cluster.host_topology defaults to none (today's host) and accepts a catalog key."""
    p = tmp_path / "study.toml"
    p.write_text(SCENARIO)
    assert load(str(p))["cluster"]["host_topology"] == ""
    p.write_text(SCENARIO + 'host_topology = "dgx1_v100"\n')
    assert load(str(p))["cluster"]["host_topology"] == "dgx1_v100"


def test_a_simulated_step_sends_tensors_over_the_topology_and_they_contend():
    """Op-level Send/Recv on a PCIe tree: gpu0->gpu2 and gpu1->gpu3 start together and share
    plx0's uplink: each takes 4 x 1 us + B / (W / 2)."""
    import hetbed as hb
    from hetbed.simulator import SimSession, sim_value

    c = Cluster(host_topology="pcie_2s_plx2_8gpu")
    w = c.add_task("worker", 0, gpu=("v100_sxm2", 4))
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [1000, 1000])
        outs = []
        for s, d in ((0, 2), (1, 3)):
            with hb.device(f"{w}/device:gpu:{s}"):
                a = x * 2.0
            with hb.device(f"{w}/device:gpu:{d}"):
                outs.append(a + 1.0)
        sess = SimSession(c)
        sess.run(outs, {x: sim_value([1000, 1000])})
    f = sess.last_record.flows
    assert len(f) == 2 and f.start_s.nunique() == 1 and set(f.bytes) == {4e6}
    assert all("plx0->cpu0" in p for p in f.path)
    for took in f.end_s - f.start_s:
        assert close(took, 4e-6 + 4e6 / (PCIE3 / 2))


def test_routes_take_the_widest_path_then_the_fewest_hops(tmp_path, monkeypatch):
    """gpu0-gpu1 joined directly by PCIe (1 hop, 15.75e9) and through an NVSwitch (2 hops,
    300e9): the route is the wider one. gpu0 to host memory: two equally wide ways (through
    the switch sw: 2 hops, or sw2 -> sw: 3 hops): the shorter one."""
    text = HOST.replace(
        'sw = "pcie_switch"', 'sw = "pcie_switch"\nsw2 = "pcie_switch"\nnv = "nvswitch"'
    )
    text = text.replace(
        '["gpu1", "sw"], ["sw", "cpu0"]',
        '["gpu1", "sw"], ["sw", "cpu0"], ["gpu0", "gpu1"], ["gpu0", "sw2"], ["sw2", "sw"]',
    )
    text += '\n[[links]]\nlink = "nvlink3"\ncount = { value = 12, source = "t" }\n'
    text += 'pairs = [["gpu0", "nv"], ["gpu1", "nv"]]\nsource = "test"\n'
    (tmp_path / "wide.toml").write_text(text)
    monkeypatch.setenv("HETBED_CATALOG_PATH", str(tmp_path))
    fabric, h = _host("wide")
    assert [x.split(":")[0] for x in _names(h.route("g0", "g1"))] == ["gpu0->nv", "nv->gpu1"]
    assert [x.split(":")[0] for x in _names(h.route("g0", "cpu"))] == ["gpu0->sw", "sw->cpu0"]
    ends = _run(fabric, [("g0", "g1")])
    assert close(ends["g0", "g1"], 2e-6 + B / 300e9)
