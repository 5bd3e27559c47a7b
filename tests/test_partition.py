"""Partitioning into per-device subgraphs joined by Send/Recv, and the local rendezvous."""

import threading

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.executor import prune
from hetbed.runtime.partition import partition
from hetbed.runtime.rendezvous import LocalRendezvous

TWO = hb.ConfigProto(device_count={"CPU": 2})


class _Dev:
    def __init__(self, name):
        self.name = name


def _split_graph():
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [3], name="x")
        with hb.device("/cpu:0"):
            a = hb.multiply(x, 2.0, name="a")
        with hb.device("/cpu:1"):
            b = hb.add(a, 1.0, name="b")
            c = hb.multiply(a, a, name="c")
            d = hb.subtract(a, b, name="d")
            out = hb.add_n([b, c, d], name="out")
    return g, x, a, out


def test_one_transfer_per_tensor_and_destination():
    """A tensor used by three ops on another device crosses once: one Send, one Recv."""
    g, x, a, out = _split_graph()
    d0, d1 = _Dev("cpu:0"), _Dev("cpu:1")
    order = prune([out.op], {x})
    parts = partition(order, lambda op: d0 if op.device.endswith("cpu:0") else d1)
    sends = [op for op in parts.ops() if op.type == "_Send"]
    recvs = [op for op in parts.ops() if op.type == "_Recv"]
    assert len(sends) == 1 and len(recvs) == 1
    assert sends[0] in parts.subgraphs["cpu:0"] and recvs[0] in parts.subgraphs["cpu:1"]
    key = sends[0].attrs["key"]
    assert key == recvs[0].attrs["key"]
    src, inc, dst, tensor, frame = key.split(";")
    assert (src, dst, tensor, frame) == ("cpu:0", "cpu:1", "a:0", "0:0")
    # every consumer on cpu:1 now reads the Recv output
    assert {op.name for (op, _i) in parts.input_map} == {"b", "c", "d"}
    assert all(op.graph is g for op in parts.ops())
    assert len(g.get_operations()) == len(set(g.get_operations()))  # user graph untouched
    assert not any(op.type in ("_Send", "_Recv") for op in g.get_operations())


def test_split_graph_values_match_single_device():
    """The partitioned step computes the same values as the single-device step."""
    g, x, a, out = _split_graph()
    xv = np.array([1.0, 2.0, 3.0], np.float32)
    with g.as_default():
        with hb.Session(config=TWO) as s2, hb.Session() as s1:
            np.testing.assert_array_equal(s2.run(out, {x: xv}), s1.run(out, {x: xv}))
            assert s2._last_plan.multi_device and not s1._last_plan.multi_device


def test_control_edge_across_devices():
    """A control dependency on an op of another device orders the step (empty Send/Recv)."""
    with hb.Graph().as_default():
        with hb.device("/cpu:0"):
            v = hb.Variable(hb.constant(1.0), name="v")
            bump = hb.assign_add(v, 10.0)
        with hb.device("/cpu:1"), hb.control_dependencies([bump]):
            after = hb.identity(hb.constant(5.0)) * 2.0
        with hb.Session(config=TWO) as s:
            s.run(hb.global_variables_initializer())
            assert s.run(after) == 10.0
            types = s.placement().type.tolist()
            assert s.run(v) == 11.0  # the control edge made the assign run
    assert types.count("_Send") == 1 and types.count("_Recv") == 1


def test_transfer_compression_rounds_to_float16():
    """With compression on, a float32 tensor arrives rounded to float16 and cast back."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [3])
        with hb.device("/cpu:0"):
            a = x * 1.0
        with hb.device("/cpu:1"):
            b = a + 0.0
        xv = np.array([1.0001, 3.14159265, 1e-3], np.float32)
        cfg = hb.ConfigProto(device_count={"CPU": 2}, compress_transfers=True)
        with hb.Session(config=cfg) as s:
            got = s.run(b, {x: xv})
        with hb.Session(config=TWO) as s:
            exact = s.run(b, {x: xv})
    np.testing.assert_array_equal(got, xv.astype(np.float16).astype(np.float32))
    np.testing.assert_array_equal(exact, xv)
    assert got.dtype == np.float32


def test_local_rendezvous_zero_copy_either_order():
    """The received object is the sent object, whether send or recv comes first."""
    rv = LocalRendezvous()
    arr = np.arange(10)
    got = []
    rv.send("k1", arr)
    rv.recv("k1", lambda v=None, error=None: got.append(v))
    rv.recv("k2", lambda v=None, error=None: got.append(v))
    rv.send("k2", arr)
    assert got[0] is arr and got[1] is arr
    assert rv.pending() == ([], [])


def test_rendezvous_abort_fails_waiters():
    """Aborting fails pending receives with the error instead of leaving them waiting."""
    rv = LocalRendezvous()
    errs = []
    rv.recv("k", lambda v=None, error=None: errs.append(error))
    rv.abort(RuntimeError("boom"))
    assert isinstance(errs[0], RuntimeError)


def test_concurrent_multi_device_steps_do_not_mix():
    """Concurrent steps on a partitioned graph each see only their own transfers."""
    g, x, a, out = _split_graph()
    errors = []
    with g.as_default(), hb.Session(config=TWO) as s:

        def worker(k):
            for i in range(100):
                xv = np.full(3, k * 100 + i, np.float32)
                av = xv * 2
                want = (av + 1) + av * av + (av - (av + 1))
                got = s.run(out, {x: xv})
                if not np.allclose(got, want):
                    errors.append((k, i))

        ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    assert not errors


def test_failure_in_one_partition_does_not_hang():
    """A kernel failing on one device aborts the step on the other (no hang), and names the op."""
    with hb.Graph().as_default():
        p = hb.placeholder(hb.float32, [None, None])
        q = hb.placeholder(hb.float32, [None, None])
        with hb.device("/cpu:0"):
            bad = hb.matmul(p, q, name="bad_matmul")
        with hb.device("/cpu:1"):
            y = hb.reduce_sum(bad * 2.0)
        cfg = hb.ConfigProto(device_count={"CPU": 2}, inter_op_parallelism_threads=1)
        with hb.Session(config=cfg) as s:
            with pytest.raises(hb.errors.InvalidArgumentError, match="bad_matmul"):
                s.run(y, {p: np.ones((400, 300)), q: np.ones((200, 400))})
            ok = s.run(y, {p: np.ones((400, 300)), q: np.ones((300, 400))})
    assert ok == 2 * 400 * 400 * 300


def test_cycle_is_an_error_naming_ops():
    """A cycle (made through control inputs) is reported with the ops on it."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [1])
        a = hb.identity(x, name="loop_a")
        b = hb.identity(a, name="loop_b")
        a.op._add_control_input(b.op)
        with hb.Session(config=TWO) as s:
            with pytest.raises(hb.errors.InvalidArgumentError, match="cycle.*loop_a.*loop_b"):
                s.run(b, {x: [1.0]})


def test_step_waiting_on_a_missing_peer_times_out():
    """A Recv whose Send never comes fails after operation_timeout_in_ms, naming it."""
    from hetbed.runtime.ops.collective import all_reduce

    with hb.Graph().as_default():
        with hb.device("/cpu:0"):
            a = hb.constant([1.0]) * 1.0
        with hb.device("/cpu:1"):
            b = hb.constant([2.0]) * 1.0
        outs = all_reduce([a, b])
        # Drop rank 1 from the gang so that rank 0 waits forever.
        g = hb.get_default_graph()
        key = outs[0].op.attrs["group_key"]
        g.get_collection_ref("collective:" + key).remove(outs[1].op)
        cfg = hb.ConfigProto(device_count={"CPU": 2}, operation_timeout_in_ms=300)
        with hb.Session(config=cfg) as s:
            with pytest.raises(hb.errors.DeadlineExceededError, match="AllReduce"):
                s.run(outs[0])
            np.testing.assert_array_equal(s.run(outs), [[3.0], [3.0]])


def test_prune_order_is_kahns_with_creation_order_ties():
    """``prune``'s order on random graphs, some with control inputs added after the fact from
    newer ops (so creation order is not topological), equals Kahn's algorithm with ties broken
    by creation order, computed here by brute force; a fed tensor cuts its producer away."""
    rng = np.random.default_rng(3)
    reordered = 0
    for trial in range(30):
        g = hb.Graph()
        with g.as_default():
            x = hb.placeholder(hb.float32, [2], name="x")
            ts = [x]
            for _ in range(25):
                a, b = rng.integers(len(ts), size=2)
                ts.append(hb.add(ts[a], ts[b]))
            if trial % 2:  # control inputs from newer ops to older ones (no cycle)
                for _ in range(4):
                    i, j = sorted(rng.choice(np.arange(1, len(ts)), size=2, replace=False))
                    if not any(t.op is ts[i].op for t in _upstream(ts[j].op)):
                        ts[i].op._add_control_input(ts[j].op)
        fed = {ts[5]} if trial % 3 == 0 else {x}
        fetch = [ts[-1].op, ts[-2].op]
        order = prune(fetch, fed)
        needed, stack = set(), list(fetch)
        while stack:
            op = stack.pop()
            if op not in needed:
                needed.add(op)
                stack += [t.op for t in op.inputs if t not in fed] + list(op.control_inputs)
        want, done = [], set()
        while len(want) < len(needed):
            ready = [op for op in needed - done
                     if all(t.op in done or t in fed for t in op.inputs)
                     and all(c in done for c in op.control_inputs)]  # fmt: skip
            nxt = min(ready, key=lambda op: op._id)
            want.append(nxt)
            done.add(nxt)
        assert [op.name for op in order] == [op.name for op in want]
        reordered += [op._id for op in order] != sorted(op._id for op in order)
    assert reordered >= 3  # (graphs where creation order was not the answer)


def _upstream(op):
    seen, ops, stack = [], set(), [op]
    while stack:
        o = stack.pop()
        if o in ops:
            continue
        ops.add(o)
        for t in o.inputs:
            seen.append(t)
            stack.append(t.op)
        stack.extend(o.control_inputs)
    return seen
