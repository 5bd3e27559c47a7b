"""What an optimizer's update sends between a worker and a PS task, in the real runtime and in
the step-level model: ``group`` makes one NoOp per device, as TF's, so a step sends no control
message for the updates it groups; the update ops' other inputs (a learning rate, an
optimizer's constants) are counted by ``profile_from_graph`` and cost their messages in the
drivers."""

from __future__ import annotations

import collections
import socket

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.distributed import worker as worker_service
from hetbed.runtime.distributed.cluster import ClusterSpec
from hetbed.simulator.profiling import profile_from_graph
from hetbed.simulator.training import ReplicaProfile, SyncPS

PS, WORKER = "/job:ps/task:0", "/job:worker/task:0"


def test_group_makes_one_no_op_per_device():
    """Inputs on one device: the NoOp is on that device. On several: a NoOp on each (after its
    inputs) and the returned one after those, in the current device scope."""
    with hb.Graph().as_default():
        with hb.device(PS):
            a, b = hb.no_op(name="a"), hb.no_op(name="b")
        with hb.device(WORKER):
            c = hb.no_op(name="c")
            one = hb.group(a, b, name="one")
            two = hb.group(a, c, b, name="two")
        assert one.device == a.device and one.name == "one"
        assert {x.name for x in one.control_inputs} == {"a", "b"}
        assert two.device == c.device and two.name == "two"
        inner = {x.device: x for x in two.control_inputs}
        assert len(inner) == 2
        assert {x.name for x in inner[a.device].control_inputs} == {"a", "b"}
        assert [x.name for x in inner[c.device].control_inputs] == ["c"]


def test_grouped_updates_run_all_of_them():
    """Values: a group over variables of two devices runs every assignment."""
    with hb.Graph().as_default():
        with hb.device("/cpu:0"):
            v = hb.Variable(1.0)
        with hb.device("/cpu:1"):
            w = hb.Variable(2.0)
        g = hb.group(hb.assign_add(v, 3.0), hb.assign_add(w, 5.0))
        with hb.Session(config=hb.ConfigProto(device_count={"CPU": 2})) as sess:
            sess.run(hb.global_variables_initializer())
            sess.run(g)
            assert sess.run([v, w]) == [4.0, 7.0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train(make_opt):
    """A two-variable linear model placed by replica_device_setter, as a real job does."""
    spec_ps = ClusterSpec({"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]})
    setter = hb.train.replica_device_setter(cluster=spec_ps, worker_device=WORKER)
    with hb.device(setter):
        step = hb.train.get_or_create_global_step()
        x = hb.constant(np.ones((8, 4), np.float32))
        w = hb.Variable(np.full((4, 3), 0.1, np.float32), name="w")
        b = hb.Variable(np.zeros(3, np.float32), name="b")
        loss = hb.reduce_sum(hb.square(hb.matmul(x, w) + b))
        return make_opt().minimize(loss, global_step=step)


OPTIMIZERS = {
    "sgd": lambda: hb.train.GradientDescentOptimizer(0.01),
    "momentum": lambda: hb.train.MomentumOptimizer(0.01, 0.9),
    "adam": lambda: hb.train.AdamOptimizer(0.01),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_real_step_sends_gradients_and_update_inputs_only(name, monkeypatch):
    """An asynchronous step on one worker and one PS task (in-process servers): the PS fetches
    each gradient and each input ``profile_from_graph`` counts (``update_inputs``: SGD's
    learning rate; momentum's and Adam's constants too), the worker each variable's value;
    no control message (the updates and the global step's increment are grouped on the PS)."""
    spec = ClusterSpec(
        {"ps": [f"127.0.0.1:{_free_port()}"], "worker": [f"127.0.0.1:{_free_port()}"]}
    )
    servers = [hb.train.Server(spec, "ps", 0), hb.train.Server(spec, "worker", 0)]
    calls: collections.Counter = collections.Counter()
    counting = [False]
    real = worker_service.Worker.recv_tensor

    def recv_tensor(self, step_id, key, timeout_s):
        if counting[0]:
            calls[self.task.split("/")[1]] += 1
        return real(self, step_id, key, timeout_s)

    monkeypatch.setattr(worker_service.Worker, "recv_tensor", recv_tensor)
    try:
        with hb.Graph().as_default():
            train = _train(OPTIMIZERS[name])
            with hb.Session(servers[1].target) as sess:
                sess.run(hb.global_variables_initializer())
                sess.run(train)
                counting[0] = True
                for _ in range(3):
                    sess.run(train)
                counting[0] = False
        with hb.Graph().as_default():
            prof = profile_from_graph(
                _train(OPTIMIZERS[name]), {}, worker="this_machine", ps="this_machine"
            )
    finally:
        for s in servers:
            s.stop(grace=0)
    assert prof.update_inputs == {"sgd": 1, "momentum": 2, "adam": 4}[name]
    assert calls["job:worker"] == 3 * (2 + prof.update_inputs)  # gradients + update inputs
    assert calls["job:ps"] == 3 * 2  # the variables' values


def test_update_inputs_cost_their_messages_per_worker_step():
    """With 100 us per message end on the PS, a step's PS time per worker is 600 us (RunGraph
    request and reply, a read, a gradient: tests/test_messages.py) and 200 us more for each
    update input (a RecvTensor call: request and reply), which SyncReplicasOptimizer's step
    does not send (its local step instead)."""
    base = dict(compute_s=1e-6, dense={"w": (4, 0)}, ps_message_s=1e-4)
    for k in (0, 1, 3):
        prof = ReplicaProfile(**base, update_inputs=k)
        steps = [SyncPS(prof, w, nic=(1e12, 0.0)).run(6).step_time() for w in (1, 2, 4)]
        per = 600e-6 + 200e-6 * k
        assert np.diff(steps) == pytest.approx([per, 2 * per], rel=0.02)
    with pytest.raises(ValueError, match="update_inputs"):
        ReplicaProfile(1.0, update_inputs=-1)
