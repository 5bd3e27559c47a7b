"""The flow-level network model and the fabrics built on it, against closed forms."""

import math

import numpy as np
import pytest
import simpy

from hetbed.simulator.network import FLOW_COLUMNS, LINK_COLUMNS, Link, Network
from hetbed.simulator.topology import Nic, SwitchFabric, TwoLevelFabric

REL = 1e-9


def close(a, b):
    return math.isclose(a, b, rel_tol=REL, abs_tol=1e-15)


def start(env, net, path, nbytes, at=0.0, **kw):
    """Request a transfer at simulated time ``at``; returns a list that gets the flow's record."""
    out = []

    def proc():
        if at:
            yield env.timeout(at)
        out.append((yield net.transfer(path, nbytes, **kw)))

    env.process(proc())
    return out


def test_on_done_callback_sees_the_same_times_as_the_event():
    """A flow with ``on_done`` makes no event and calls back at L + B/W, sharing the link fairly."""
    env = simpy.Environment()
    net = Network(env)
    link = net.add_link("l", 1e9, 5e-6)
    got = []
    assert net.transfer([link], 2e6, on_done=lambda r: got.append((env.now, r))) is None
    other = start(env, net, [link], 2e6)
    env.run()
    ((now, r),), (o,) = got, other
    assert close(now, 5e-6 + 4e6 / 1e9) and close(r["end_s"], now)  # two equal flows share W
    assert close(o["end_s"], r["end_s"])


def test_one_flow_takes_latency_plus_size_over_bandwidth():
    """One flow of B bytes over one link (W, L) ends at L + B/W; its first byte at L."""
    env = simpy.Environment()
    net = Network(env)
    link = net.add_link("l", 1.25e9, 3e-6)
    rec = start(env, net, [link], 1e6, src="a", dst="b", tag="grad")
    env.run()
    (r,) = rec
    assert close(r["end_s"], 3e-6 + 1e6 / 1.25e9)
    assert close(r["first_byte_s"], 3e-6) and r["start_s"] == 0.0
    assert (r["src"], r["dst"], r["tag"], r["bytes"], r["path"]) == ("a", "b", "grad", 1e6, "l")


def test_path_latency_is_the_sum_and_rate_the_narrowest_link():
    """A flow over links (W1, L1), (W2, L2) ends at L1 + L2 + B / min(W1, W2)."""
    env = simpy.Environment()
    net = Network(env)
    a, b = net.add_link("a", 8.0, 0.5), net.add_link("b", 2.0, 0.25)
    rec = start(env, net, [a, b], 10.0)
    env.run()
    assert close(rec[0]["end_s"], 0.75 + 10.0 / 2.0)
    assert rec[0]["path"] == "a>b"


def test_two_equal_flows_share_a_link_equally():
    """Two flows of B started together on one link each end at L + 2B/W."""
    env = simpy.Environment()
    net = Network(env)
    link = net.add_link("l", 100.0, 0.1)
    r1, r2 = start(env, net, [link], 50.0), start(env, net, [link], 50.0)
    env.run()
    assert close(r1[0]["end_s"], 0.1 + 1.0) and close(r2[0]["end_s"], 0.1 + 1.0)


def test_flow_joining_half_way():
    """A second flow arriving when the first is half done: the first ends at L + 3B/2W, the second
    (alone for its last B/2 bytes) at L + 2B/W."""
    env = simpy.Environment()
    net = Network(env)
    W, L, B = 40.0, 0.5, 20.0
    link = net.add_link("l", W, L)
    first = start(env, net, [link], B)
    # requested at B/2W so that it arrives at L + B/2W, when the first has sent B/2
    second = start(env, net, [link], B, at=B / (2 * W))
    env.run()
    # both at W/2 from L + B/2W: the first's B/2 take B/W more; the second then has B/2 left alone
    assert close(first[0]["end_s"], L + 3 * B / (2 * W))
    assert close(second[0]["end_s"], L + 2 * B / W)
    assert close(second[0]["first_byte_s"], L + B / (2 * W))


def test_parking_lot_max_min():
    """A crosses links 1 (10 B/s) and 2 (4 B/s), B only 1, C only 2: max-min gives A = C = 2,
    B = 8; when A ends, B gets 10 and C 4."""
    env = simpy.Environment()
    net = Network(env)
    l1, l2 = net.add_link("1", 10.0, 0.1), net.add_link("2", 4.0, 0.2)
    # requests staggered so that all three arrive at t = 0.3 after their path latencies
    a = start(env, net, [l1, l2], 4.0, at=0.0, tag="A")
    b = start(env, net, [l1], 40.0, at=0.2, tag="B")
    c = start(env, net, [l2], 8.0, at=0.1, tag="C")
    env.run()
    t0 = 0.3
    # A: 4 bytes at 2 B/s -> ends t0 + 2. Then B has 40 - 16 = 24 left at 10 B/s; C has 8 - 4 at 4.
    assert close(a[0]["end_s"], t0 + 2.0)
    assert close(c[0]["end_s"], t0 + 2.0 + 4.0 / 4.0)
    assert close(b[0]["end_s"], t0 + 2.0 + 24.0 / 10.0)
    links = net.link_frame().set_index("link")
    assert close(links.loc["1", "bytes"], 44.0) and close(links.loc["2", "bytes"], 12.0)
    assert close(links.loc["1", "busy_s"], 4.4) and close(links.loc["2", "busy_s"], 3.0)


def test_incast_through_a_switch_emerges_at_the_receiver_downlink():
    """N workers pushing B bytes each to one host through a switch all end at L + N*B/W_nic."""
    env = simpy.Environment()
    net = Network(env)
    W, L, B, N = 1.25e9, 10e-6, 4e6, 16
    hosts = {f"w{i}": Nic(W, L) for i in range(N)} | {"ps": (W, L)}
    fabric = SwitchFabric(net, hosts)
    recs = [
        start(env, net, fabric.route(f"w{i}", "ps"), B, src=f"w{i}", dst="ps") for i in range(N)
    ]
    env.run()
    for rec in recs:
        assert close(rec[0]["end_s"], L + N * B / W)
    links = net.link_frame().set_index("link")
    assert close(links.loc["ps:nic:down", "bytes"], N * B)
    assert close(links.loc["ps:nic:down", "utilization"], N * B / (W * (L + N * B / W)))
    assert close(links.loc["w0:nic:up", "busy_s"], N * B / W)


def _racks():
    return [[f"a{i}" for i in range(4)], [f"b{i}" for i in range(4)]]


def test_two_level_oversubscribed_uplink_slows_cross_rack_flows():
    """Oversubscription 4 on 4 NICs of W: the ToR uplink has W; four cross-rack flows get W/4 each,
    while an intra-rack flow sharing a0's NIC gets the 3W/4 left on it."""
    env = simpy.Environment()
    net = Network(env)
    W, L, core, B = 1e9, 4e-6, 2e-6, 1e6
    fabric = TwoLevelFabric(net, _racks(), Nic(W, L), oversubscription=4, core_latency_s=core)
    assert [link.name for link in fabric.route("a0", "b1")] == [
        "a0:nic:up",
        "rack0:tor:up",
        "rack1:tor:down",
        "b1:nic:down",
    ]
    assert close(fabric.tor_up[0].bandwidth_bytes_per_s, W)
    cross = [start(env, net, fabric.route(f"a{i}", f"b{i}"), B) for i in range(4)]
    # requested `core` later so that it reaches the links together with the cross-rack flows
    intra = start(env, net, fabric.route("a0", "a1"), B, at=core)
    env.run()
    for rec in cross:
        assert close(rec[0]["end_s"], L + core + 4 * B / W)
    assert close(intra[0]["end_s"], L + core + B / (0.75 * W))


def test_two_level_without_oversubscription_and_with_a_given_uplink():
    """Oversubscription 1 leaves cross-rack flows NIC-bound (B/W); an uplink of 2W halves them."""
    W, L, B = 1e9, 4e-6, 1e6
    for kwargs, rate in (({}, W), ({"rack_uplink_bandwidth": 2 * W}, W / 2)):
        env = simpy.Environment()
        net = Network(env)
        fabric = TwoLevelFabric(net, _racks(), (W, L), **kwargs)
        recs = [start(env, net, fabric.route(f"a{i}", f"b{i}"), B) for i in range(4)]
        env.run()
        for rec in recs:
            assert close(rec[0]["end_s"], L + B / rate)


def test_zero_byte_flow_takes_exactly_the_latency_and_empty_path_is_instant():
    """A zero-byte flow ends at its path latency; any flow over an empty path ends at once."""
    env = simpy.Environment()
    net = Network(env)
    a, b = net.add_link("a", 1e9, 1.5e-6), net.add_link("b", 1e9, 2.5e-6)
    zero = start(env, net, [a, b], 0)
    local = start(env, net, [], 123, at=1.0)
    env.run()
    assert zero[0]["end_s"] == zero[0]["first_byte_s"] == 1.5e-6 + 2.5e-6
    assert local[0]["end_s"] == local[0]["start_s"] == 1.0
    assert local[0]["path"] == ""
    links = net.link_frame()
    assert (links["bytes"] == 0).all() and (links["busy_s"] == 0).all()


def test_frames_have_documented_columns_and_units():
    """flow_frame has one row per flow with the documented columns; link_frame one per link with
    bytes, busy seconds and utilization = bytes / (bandwidth x horizon)."""
    env = simpy.Environment()
    net = Network(env)
    assert list(net.flow_frame().columns) == list(FLOW_COLUMNS)
    link = net.add_link("l", 200.0, 1.0)
    idle = net.add_link("idle", 5.0)
    start(env, net, [link], 100.0, src="x", dst="y", tag=7)
    env.run()
    flows = net.flow_frame()
    assert list(flows.columns) == list(FLOW_COLUMNS) and len(flows) == 1
    row = flows.iloc[0]
    assert (row["src"], row["dst"], row["tag"], row["path"]) == ("x", "y", 7, "l")
    assert close(row["end_s"] - row["first_byte_s"], 0.5)
    links = net.link_frame(horizon_s=10.0).set_index("link")
    assert list(net.link_frame().columns) == list(LINK_COLUMNS)
    assert close(links.loc["l", "bytes"], 100.0) and close(links.loc["l", "busy_s"], 0.5)
    assert close(links.loc["l", "utilization"], 100.0 / (200.0 * 10.0))
    assert links.loc["idle", "bytes"] == 0 and idle.active_flows == 0
    assert close(net.link_frame().set_index("link").loc["l", "utilization"], 100.0 / (200.0 * 1.5))


def test_link_frame_mid_flight_counts_bytes_so_far():
    """Before a flow ends, link_frame counts the bytes sent so far at the current rate."""
    env = simpy.Environment()
    net = Network(env)
    link = net.add_link("l", 10.0, 1.0)
    start(env, net, [link], 100.0)
    env.run(until=4.0)
    assert net.active_flows == 1 and link.active_flows == 1
    row = net.link_frame().set_index("link").loc["l"]
    assert close(row["bytes"], 30.0) and close(row["busy_s"], 3.0)


def _reference_end_times(flows, bandwidth):
    """Brute-force fluid simulation: naive max-min over all active flows at every event."""
    t, active, ends = 0.0, {}, {}
    pending = sorted(range(len(flows)), key=lambda i: flows[i][0])
    while pending or active:
        rates = {}
        if active:
            cap = dict(bandwidth)
            todo = set(active)
            while todo:
                share = {
                    l: cap[l] / sum(1 for f in todo if l in flows[f][1])
                    for l in cap
                    if any(l in flows[f][1] for f in todo)
                }
                l_min = min(share, key=share.get)
                for f in [f for f in todo if l_min in flows[f][1]]:
                    rates[f] = share[l_min]
                    todo.discard(f)
                    for l in flows[f][1]:
                        cap[l] -= share[l_min]
        t_arr = flows[pending[0]][0] if pending else math.inf
        t_end = min((t + active[f] / rates[f] for f in active), default=math.inf)
        t_next = min(t_arr, t_end)
        for f in active:
            active[f] -= rates[f] * (t_next - t)
        t = t_next
        for f in [f for f in active if active[f] <= 1e-9 * flows[f][2]]:
            ends[f] = t
            del active[f]
        while pending and flows[pending[0]][0] <= t:
            f = pending.pop(0)
            active[f] = flows[f][2]
    return ends


@pytest.mark.parametrize("seed,grid", [(7, False), (8, False), (9, True), (10, True)])
def test_random_flows_match_a_brute_force_fluid_simulation(seed, grid):
    """Random flows over random paths end when a naive max-min simulation says, and every link
    carries exactly the bytes of the flows crossing it (``grid``: integer values, so that many
    arrivals and completions coincide)."""
    rng = np.random.default_rng(seed)
    draw = (lambda lo, hi: float(rng.integers(lo, hi))) if grid else rng.uniform
    bandwidth = {f"l{i}": float(draw(1, 10)) for i in range(6)}
    flows = []
    for _ in range(40):
        k = int(rng.integers(1, 4))
        path = tuple(rng.choice(sorted(bandwidth), size=k, replace=False))
        flows.append((float(draw(0, 20)), path, float(draw(1, 30))))
    env = simpy.Environment()
    net = Network(env)
    links = {name: net.add_link(name, bw) for name, bw in bandwidth.items()}
    recs = [start(env, net, [links[l] for l in p], b, at=t0) for t0, p, b in flows]
    env.run()
    ref = _reference_end_times(flows, bandwidth)
    for i, rec in enumerate(recs):
        assert math.isclose(rec[0]["end_s"], ref[i], rel_tol=1e-9), (i, rec[0], ref[i])
    carried = net.link_frame().set_index("link")["bytes"]
    for name in bandwidth:
        expect = sum(b for _, p, b in flows if name in p)
        assert math.isclose(carried[name], expect, rel_tol=1e-9)


def test_runs_are_deterministic():
    """The same flows give the same records, in the same order."""

    def run():
        env = simpy.Environment()
        net = Network(env)
        shared = net.add_link("s", 10.0, 0.01)
        for i in range(20):
            own = net.add_link(f"p{i}", 5.0 + i % 3, 0.01)
            start(env, net, [own, shared], 10.0 + i % 4, at=0.1 * (i % 5), src=str(i))
        env.run()
        return net.flow_frame()

    first, second = run(), run()
    assert first.equals(second)


def test_bad_arguments_are_rejected():
    """Negative sizes, foreign or repeated links, duplicate names and bad bandwidths raise."""
    env = simpy.Environment()
    net = Network(env)
    link = net.add_link("l", 1.0)
    with pytest.raises(ValueError, match="bytes must be finite and >= 0, got -1"):
        net.transfer([link], -1)
    with pytest.raises(ValueError, match="not a link of this network"):
        net.transfer([Link("l", 1.0)], 1)
    with pytest.raises(ValueError, match="crosses a link twice"):
        net.transfer([link, link], 1)
    with pytest.raises(ValueError, match="link 'l' already exists"):
        net.add_link("l", 1.0)
    with pytest.raises(ValueError, match="bandwidth must be finite and > 0 bytes/s, got 0.0"):
        net.add_link("z", 0)
    with pytest.raises(ValueError, match="latency must be finite and >= 0 s"):
        net.add_link("n", 1.0, -1e-6)


def _two_hosts():
    net = Network(simpy.Environment())
    fabric = SwitchFabric(net, {"/job:w/task:0": Nic(1e9, 2e-6), "/job:w/task:1": Nic(1e9, 2e-6)})
    for task in ("/job:w/task:0", "/job:w/task:1"):
        host = fabric.host(task)
        host.add_memory_device("device:CPU:0")
        host.add_device_link("device:GPU:0", 16e9, 1e-6)
        host.add_device_link("device:GPU:1", 16e9, 1e-6)
        host.add_device_link("device:GPU:2", 16e9, 1e-6)
        host.add_peer_link("device:GPU:0", "device:GPU:1", 50e9, 0.5e-6)
    return fabric


def _names(links):
    return [link.name for link in links]


def test_route_devices_within_a_host():
    """Same device: no links; NVLink peers: the peer link; otherwise device -> host -> device, and
    a CPU in host memory has no PCIe hop."""
    fabric = _two_hosts()
    h = "/job:w/task:0"
    assert fabric.route_devices(f"{h}/device:GPU:0", f"{h}/device:GPU:0") == []
    assert fabric.route_devices(f"{h}/device:CPU:0", f"{h}/device:CPU:0") == []
    assert _names(fabric.route_devices(f"{h}/device:GPU:1", f"{h}/device:GPU:0")) == [
        f"{h}/device:GPU:1:peer:device:GPU:0"
    ]
    assert _names(fabric.route_devices(f"{h}/device:GPU:0", f"{h}/device:GPU:2")) == [
        f"{h}/device:GPU:0:pcie:up",
        f"{h}/device:GPU:2:pcie:down",
    ]
    assert _names(fabric.route_devices(f"{h}/device:CPU:0", f"{h}/device:GPU:2")) == [
        f"{h}/device:GPU:2:pcie:down"
    ]
    assert _names(fabric.route_devices(f"{h}/device:GPU:2", f"{h}/device:CPU:0")) == [
        f"{h}/device:GPU:2:pcie:up"
    ]


def test_route_devices_across_hosts():
    """Across hosts: PCIe up, the fabric route, PCIe down (no PCIe hop for CPUs)."""
    fabric = _two_hosts()
    a, b = "/job:w/task:0", "/job:w/task:1"
    assert _names(fabric.route_devices(f"{a}/device:GPU:0", f"{b}/device:GPU:1")) == [
        f"{a}/device:GPU:0:pcie:up",
        f"{a}:nic:up",
        f"{b}:nic:down",
        f"{b}/device:GPU:1:pcie:down",
    ]
    assert _names(fabric.route_devices(f"{a}/device:CPU:0", f"{b}/device:CPU:0")) == [
        f"{a}:nic:up",
        f"{b}:nic:down",
    ]


def test_gpu_to_gpu_across_hosts_time():
    """A tensor from GPU to GPU across hosts is limited by the NIC: 1 us + 2 us + 1 us + B/W_nic."""
    fabric = _two_hosts()
    env, net = fabric.network.env, fabric.network
    path = fabric.route_devices("/job:w/task:0/device:GPU:0", "/job:w/task:1/device:GPU:0")
    rec = start(env, net, path, 1e6)
    env.run()
    assert close(rec[0]["end_s"], 4e-6 + 1e6 / 1e9)


def test_unknown_devices_and_hosts_are_named():
    """Routing to an unknown host or device raises KeyError listing what exists."""
    fabric = _two_hosts()
    with pytest.raises(KeyError, match=r"unknown host '/job:w/task:9'"):
        fabric.route_devices("/job:w/task:9/device:GPU:0", "/job:w/task:0/device:GPU:0")
    with pytest.raises(KeyError, match=r"unknown device 'device:GPU:7'.*device:CPU:0"):
        fabric.route_devices("/job:w/task:0/device:GPU:7", "/job:w/task:1/device:GPU:0")
    with pytest.raises(ValueError, match="must be named 'HOST/DEVICE'"):
        fabric.route_devices("gpu0", "/job:w/task:1/device:GPU:0")
    with pytest.raises(ValueError, match="already has a device"):
        fabric.host("/job:w/task:0").add_device_link("device:GPU:0", 1e9)
    with pytest.raises(ValueError, match="more than one rack"):
        TwoLevelFabric(Network(simpy.Environment()), [["a", "b"], ["b"]], Nic(1e9))


# ---- the two solvers ----------------------------------------------------------------------


def _random_bundles(solver, seed, cancel=False):
    """Random bundles from senders of two speeds to random groups of equal links (one bundle per
    sender and group at a time), some inbound; optionally cancelling some mid-flight. Returns
    each bundle's end time and every link's bytes and busy time."""
    rng = np.random.default_rng(seed)
    env = simpy.Environment()
    net = Network(env, solver=solver, keep_records=False)
    senders = [
        net.add_link(f"s{i}", float(rng.choice([1e9, 2.5e9])), float(rng.choice([0, 5e-5])))
        for i in range(10)
    ]
    groups = []
    for g in range(int(rng.integers(1, 4))):
        bw, lat = float(rng.choice([1e9, 4e9])), float(rng.choice([0, 1e-4]))
        links = [net.add_link(f"g{g}.{k}", bw, lat) for k in range(int(rng.integers(1, 4)))]
        groups.append(net.link_group(f"g{g}", links))
    ends = {}

    def proc(i):
        for rep in range(4):
            yield env.timeout(float(rng.uniform(0, 0.004)))
            g = int(rng.integers(len(groups)))
            ev = env.event()
            b = net.bundle(senders[i], groups[g], float(rng.uniform(1e5, 4e6)), ev.succeed)
            if cancel and rng.random() < 0.25:
                yield env.timeout(float(rng.uniform(0, 0.002)))
                net.cancel(b)
                ends[(i, rep)] = None
                continue
            yield ev
            ends[(i, rep)] = env.now

    for i in range(len(senders)):
        env.process(proc(i))
    env.run()
    assert net.active_flows == 0
    return ends, net.link_frame().set_index("link")[["bytes", "busy_s"]]


@pytest.mark.parametrize("seed", range(6))
def test_the_classes_solver_equals_the_exact_one_on_random_bundles(seed):
    """Bundles solved on symmetry classes end when one flow per (sender, group link) solved
    exactly says, cancelled ones included, and every link carries the same bytes and is busy
    as long."""
    cancel = seed % 2 == 1
    fast, fast_links = _random_bundles("classes", seed, cancel)
    exact, exact_links = _random_bundles("exact", seed, cancel)
    assert fast.keys() == exact.keys() and len(fast) == 40
    for k, t in fast.items():
        if t is None:
            assert exact[k] is None
        else:
            assert t == pytest.approx(exact[k], rel=1e-12, abs=1e-15), k
    assert fast_links.index.equals(exact_links.index)
    assert np.allclose(fast_links.to_numpy(), exact_links.to_numpy(), rtol=1e-9, atol=1e-6)
    assert (fast_links["bytes"] > 0).any()


def test_link_books_count_bundles_and_the_closed_form():
    """n senders pulling B bytes from each of the m links of a group at the same instant share
    each group link's W: all end at L + n B / W, the group's links each carry n B, the senders'
    m B."""
    n, m, B, W, L = 3, 2, 1e6, 1e9, 1e-5
    for solver in ("classes", "exact"):
        env = simpy.Environment()
        net = Network(env, solver=solver)
        senders = [net.add_link(f"w{i}", 10 * W, L / 2) for i in range(n)]
        group = net.link_group("ps", [net.add_link(f"ps{k}", W, L / 2) for k in range(m)])
        ends = []
        for s in senders:
            net.bundle(s, group, B, lambda e=env, out=ends: out.append(e.now), inbound=True)
        env.run()
        assert ends == [approx_(L + n * B / W)] * n
        books = net.link_frame().set_index("link")
        for k in range(m):
            assert close(books.loc[f"ps{k}", "bytes"], n * B)
            assert close(books.loc[f"ps{k}", "busy_s"], n * B / W)
        for i in range(n):
            assert close(books.loc[f"w{i}", "bytes"], m * B)


def approx_(x):
    return pytest.approx(x, rel=1e-12)


def test_bundle_errors_name_the_problem():
    env = simpy.Environment()
    net = Network(env, solver="classes")
    a, b, c = (net.add_link(n, 1e9) for n in "abc")
    with pytest.raises(ValueError, match="network solver must be one of"):
        Network(env, solver="fast")
    with pytest.raises(ValueError, match="equal bandwidth and latency"):
        net.link_group("bad", [b, net.add_link("slow", 1e8)])
    group = net.link_group("g", [b, c])
    with pytest.raises(ValueError, match="already in group 'g'"):
        net.link_group("g2", [b])
    with pytest.raises(RuntimeError, match="carries bundles only"):
        net.transfer([a], 10)
    net.bundle(a, group, 10.0)
    with pytest.raises(RuntimeError, match="'a' already has a bundle to 'g' in flight"):
        net.bundle(a, group, 10.0)
    with pytest.raises(ValueError, match="bytes must be finite and >= 0"):
        net.bundle(a, group, -1)
    other = Network(env, solver="classes")
    foreign = other.link_group("g", [other.add_link("x", 1e9)])
    with pytest.raises(ValueError, match="not a link group of this network"):
        net.bundle(a, foreign, 1.0)
    env.run()
    net.bundle(a, group, 10.0)  # the first one finished: a new one may go


@pytest.mark.parametrize("solver", ["classes", "exact"])
def test_a_delayed_bundle_leaves_after_its_delay_and_can_be_withdrawn(solver):
    """A bundle given ``delay`` d has its first bytes d + latency from now (so it ends then plus
    its bytes to both links of the group / the sender's bandwidth, alone on its links); cancelled during the delay it never arrives and its
    sender may send again; a negative delay is an error naming it."""
    env = simpy.Environment()
    net = Network(env, solver=solver)
    a, b, c = (net.add_link(n, 1e9, 1e-4) for n in "abc")
    group = net.link_group("g", [b, c])
    other = net.link_group("h", [net.add_link("d", 1e9, 1e-4)])
    ends = []
    net.bundle(a, group, 1e6, lambda: ends.append(env.now), delay=0.25)
    gone = net.bundle(a, other, 1e6, lambda: ends.append(-1.0), delay=0.5)
    env.run(until=0.2501)
    assert net.active_flows == 0  # (the first one is still within its latency)
    net.cancel(gone)
    env.run()
    assert ends == [pytest.approx(0.25 + 2e-4 + 2e6 / 1e9, rel=1e-12)]
    assert net.active_flows == 0 and a._carried(env.now) == pytest.approx(2e6)
    net.bundle(a, other, 1e6, lambda: ends.append(env.now))  # (it may send to "h" again)
    env.run()
    assert len(ends) == 2
    with pytest.raises(ValueError, match="delay must be finite and >= 0 s, got -1.0"):
        net.bundle(a, group, 1.0, delay=-1.0)


@pytest.mark.parametrize("keep_records", [False, True])
def test_a_bundle_ended_by_its_flow_ends_once_at_its_time(keep_records):
    """``ended`` (classes solver): the bundle's flow calls it with None where ``on_done()`` would
    be called, once, at the same time (with records kept, ``on_done`` as before); a cancelled
    one calls neither."""
    env = simpy.Environment()
    net = Network(env, solver="classes", keep_records=keep_records)
    a, b, c = (net.add_link(n, 1e9, 1e-4) for n in "abc")
    group = net.link_group("g", [b, c])
    ends, got = [], []
    net.bundle(
        a, group, 1e6, lambda: ends.append(env.now), ended=lambda r: got.append((r, env.now))
    )
    gone = net.bundle(c, net.link_group("h", [net.add_link("d", 1e9)]), 1e6, ended=got.append)
    net.cancel(gone)
    env.run()
    when = pytest.approx(2e-4 + 2e6 / 1e9, rel=1e-12)
    if keep_records:
        assert ends == [when] and got == []
    else:
        assert ends == [] and got == [(None, when)]


def test_flow_log_is_the_list_it_stands_for():
    """``Network.records`` (a FlowLog) against a plain list under random appends, replayed
    steps' rows added whole (times shifted), reads from a step's start and drops of the oldest:
    the same records in the same order every time; a replayed step's own rows come back
    unread (``ShiftedFlows``) and are copies (the template is left alone)."""
    from hetbed.simulator.netresults import FlowLog, ShiftedFlows

    rng = np.random.default_rng(7)
    log, ref = FlowLog(), []
    template = [{"tag": f"t{i}", "start_s": 0.1 * i, "first_byte_s": 0.2 * i, "end_s": 0.3 * i}
                for i in range(3)]  # fmt: skip
    kept = [dict(r) for r in template]
    seq = 0
    for _ in range(400):
        what = rng.integers(4)
        if what == 0:
            r = {"tag": f"a{seq}", "start_s": seq, "first_byte_s": seq, "end_s": seq}
            seq += 1
            log.append(r)
            ref.append(r)
        elif what == 1:
            n, at = len(log), float(rng.integers(100))
            log.add_shifted(template, at)
            ref += [{**r, **{k: r[k] + at for k in _FLOW_TIMES_NAMES}} for r in template]
            step = log[n:]
            assert isinstance(step, ShiftedFlows) and len(step) == 3
        elif what == 2:
            n = int(rng.integers(len(ref) + 1))
            assert list(log[n:]) == ref[n:]
        else:
            n = int(rng.integers(len(ref) + 1))
            del log[:n]
            del ref[:n]
        assert len(log) == len(ref) and list(log) == ref
    assert template == kept
    with pytest.raises(TypeError, match="oldest"):
        del log[2:]
    log.extend([{"tag": "e"}])
    assert list(log)[-1] == {"tag": "e"} and len(log) == len(ref) + 1
    log.clear()
    assert len(log) == 0 and list(log) == []
    log.add_shifted(template, 1.0)
    log.append({"tag": "z"})
    assert [r["tag"] for r in log] == ["t0", "t1", "t2", "z"]


_FLOW_TIMES_NAMES = ("start_s", "first_byte_s", "end_s")
