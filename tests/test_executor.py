"""The executor: prepared-graph caching, buffer freeing, parallel and concurrent steps."""

import threading
import time
import weakref

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.registry import Cost, apply, defop, unchanged_shape

# Test-only ops, registered once for this module.
_Sleep = defop("TestSleep", shape=unchanged_shape, stateful=True)


@_Sleep.kernel("cpu")
def _sleep(ctx, x):
    time.sleep(ctx.attrs["seconds"])
    return x + 1


@_Sleep.cost
def _sleep_cost(op, ins, outs):
    return Cost(flops=1e12)  # "expensive": worth handing to a pool thread


_Probe = defop("TestProbe", shape=unchanged_shape, stateful=True)
_seen: dict = {}


@_Probe.kernel("cpu")
def _probe(ctx, x):
    _seen[ctx.attrs["tag"]] = x
    return x * 1


_Check = defop("TestCheckFreed", shape=unchanged_shape, stateful=True)


@_Check.kernel("cpu")
def _check(ctx, x):
    ref = _seen.pop(ctx.attrs["tag"] + "_ref")
    _seen[ctx.attrs["tag"] + "_alive"] = ref() is not None
    return x


def test_intermediate_freed_after_last_consumer():
    """An intermediate buffer is released once its last consumer has run, before the step ends."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [1000])
        a = apply("TestProbe", [x * 2.0], {"tag": "a"})
        b = a + 1.0  # last consumer of a
        c = apply("TestCheckFreed", [b * 3.0], {"tag": "a"})
        with hb.Session() as s:
            # Wrap the probe so that it records a weak reference to its output.
            orig = _Probe.kernels["cpu"][0].fn

            def probe_with_ref(ctx, v):
                out = orig(ctx, v)
                _seen["a_ref"] = weakref.ref(out)
                return out

            _Probe.kernels["cpu"][0].fn = probe_with_ref
            try:
                got = s.run(c, {x: np.ones(1000, np.float32)})
            finally:
                _Probe.kernels["cpu"][0].fn = orig
    np.testing.assert_array_equal(got, np.full(1000, 9.0, np.float32))
    assert _seen.pop("a_alive") is False
    _seen.clear()


def test_prepared_graph_cached_per_signature():
    """Repeated runs with the same fetches and feeds reuse one prepared graph."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [2])
        y = x * 3.0
        with hb.Session() as s:
            for i in range(5):
                np.testing.assert_array_equal(s.run(y, {x: [i, 1]}), [3 * i, 3])
            assert len(s._plans) == 1
            s.run([y, x], {x: [0, 0]})
            assert len(s._plans) == 2


def test_independent_expensive_nodes_run_in_parallel():
    """With inter-op threads, two independent slow nodes overlap in time."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [3])
        a = apply("TestSleep", [x], {"seconds": 0.3})
        b = apply("TestSleep", [x * 2.0], {"seconds": 0.3})
        y = a + b
        cfg = hb.ConfigProto(inter_op_parallelism_threads=2)
        with hb.Session(config=cfg) as s:
            s.run(y, {x: np.zeros(3, np.float32)})
            t = time.perf_counter()
            got = s.run(y, {x: np.ones(3, np.float32)})
            took = time.perf_counter() - t
    np.testing.assert_array_equal(got, [5, 5, 5])
    assert took < 0.5, f"two 0.3 s nodes took {took:.2f} s: they did not overlap"


def test_serial_without_pool():
    """Without inter-op threads the same two nodes run one after the other (same values)."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [3])
        a = apply("TestSleep", [x], {"seconds": 0.1})
        b = apply("TestSleep", [x * 2.0], {"seconds": 0.1})
        with hb.Session() as s:
            t = time.perf_counter()
            got = s.run(a + b, {x: np.ones(3, np.float32)})
            took = time.perf_counter() - t
    np.testing.assert_array_equal(got, [5, 5, 5])
    assert took >= 0.2


def test_concurrent_steps_do_not_mix():
    """Several threads running steps on one Session each get the result of their own feed."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [64])
        y = hb.reduce_sum(hb.square(x) + x)
        counter = hb.Variable(hb.constant(0.0), name="counter")
        inc = hb.assign_add(counter, 1.0)
        errors = []
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())

            def worker(k):
                for i in range(200):
                    v = np.full(64, k + i, np.float32)
                    got = s.run([y, inc], {x: v})[0]
                    want = float(np.sum(v * v + v))
                    if abs(got - want) > 1e-3 * max(1, want):
                        errors.append((k, i, got, want))

            threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors
            assert s.run(counter) == 800.0


def test_kernel_error_names_op_and_session_survives():
    """A kernel failing at run time raises an OpError naming the op and the input shapes."""
    with hb.Graph().as_default():
        a = hb.placeholder(hb.float32, [None, None], name="a")
        b = hb.placeholder(hb.float32, [None, None], name="b")
        c = hb.matmul(a, b, name="mm")
        with hb.Session() as s:
            with pytest.raises(hb.errors.InvalidArgumentError, match=r"(?s)mm.*\(2, 3\).*\(4, 5\)"):
                s.run(c, {a: np.ones((2, 3)), b: np.ones((4, 5))})
            np.testing.assert_array_equal(
                s.run(c, {a: np.ones((2, 3)), b: np.ones((3, 1))}), [[3], [3]]
            )


_RaiseAsync = defop("TestRaiseAsync", shape=unchanged_shape, stateful=True)


@_RaiseAsync.kernel("cpu", is_async=True)
def _raise_async(ctx, step, inputs, done):
    raise hb.errors.AbortedError("step aborted: the peer failed")


def test_async_kernel_raising_at_start_fails_the_step():
    """An asynchronous kernel that raises instead of calling ``done`` (a Send into a rendezvous
    aborted by another task) fails the step with its error while other nodes are outstanding;
    the step used to wait forever for the completion."""
    out: list = []
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [2])
        slow = apply("TestSleep", [x], {"seconds": 0.2})
        bad = apply("TestRaiseAsync", [x * 2.0], {})
        with hb.Session() as s:

            def run():
                try:
                    s.run([slow, bad], {x: np.ones(2, np.float32)})
                except Exception as e:  # noqa: BLE001 - checked below
                    out.append(e)

            t = threading.Thread(target=run, daemon=True)
            t.start()
            t.join(30)
    assert not t.is_alive(), "the step hung on an asynchronous node that raised"
    assert len(out) == 1 and isinstance(out[0], hb.errors.AbortedError)
    assert "the peer failed" in str(out[0]) and "TestRaiseAsync" in str(out[0])


@pytest.mark.parametrize("traced", [False, True])
def test_runtime_error_names_the_input_shapes(traced):
    """A kernel failing at run time is reported with the shapes it ran on, on either schedule
    (the clocked one has released the inputs' slots by then)."""
    with hb.Graph().as_default():
        a = hb.placeholder(hb.float32, [None, None])
        b = hb.placeholder(hb.float32, [None, None])
        y = hb.matmul(a * 1.0, b * 1.0)
        with hb.Session() as s:
            kw = {}
            if traced:
                kw = {"options": hb.RunOptions(trace_level=hb.RunOptions.FULL_TRACE)}
                kw["run_metadata"] = hb.RunMetadata()
            feed = {a: np.ones((2, 3), np.float32), b: np.ones((4, 5), np.float32)}
            with pytest.raises(hb.errors.InvalidArgumentError) as e:
                s.run(y, feed, **kw)
    assert "MatMul" in str(e.value) and "runtime input shapes: [(2, 3), (4, 5)]" in str(e.value)


def test_a_traced_async_node_ends_when_its_kernel_is_done():
    """A dequeue that finds its element in place completes at once; the schedule takes its
    completion only after the nodes that were ready (here 150 ms of py_funcs), but the trace
    ends it when its kernel called ``done`` (TensorFlow's step stats do the same): a profile
    built from traces would otherwise charge the other nodes' time to it."""

    def slow(x):
        time.sleep(0.05)
        return x

    with hb.Graph().as_default():
        q = hb.FIFOQueue(4, [hb.float32], shapes=[[]])
        put = q.enqueue([hb.constant(np.float32(1.0))])
        got = q.dequeue()
        later = [hb.py_func(slow, [hb.constant(np.float32(k))], hb.float32) for k in range(3)]
        with hb.Session() as s:
            s.run(put)
            meta = hb.RunMetadata()
            opts = hb.RunOptions(trace_level=hb.RunOptions.FULL_TRACE)
            value, *_ = s.run([got, *later], options=opts, run_metadata=meta)
    assert value == 1.0
    ops = meta.step_stats.set_index("type")
    deq, first = ops.loc["QueueDequeue"], ops.loc["PyFunc"].start_s.min()
    assert deq.start_s < first  # it started before the py_funcs ran ...
    assert deq.duration_s < 0.01 and deq.end_s < first  # ... and was done before they began
