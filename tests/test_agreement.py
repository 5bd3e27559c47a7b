"""The two simulators agree: for the models of the cluster-fidelity grid (one scalar per PS
task, one dense variable of 1, 10 and 100 MB), 1 to 8 workers and no stragglers, the step-level
SyncPS driver (a profile of one replica) and an op-level simulation of the replicated graph
give median step times within 5% of each other. The workers are CPU hosts, as in the grid
(`hetbed cluster` on one machine): with a GPU behind the NIC the two differ by design, the
op-level flow crossing NIC and PCIe at once where the step-level driver adds the profile's
host-to-GPU copy after the network transfer (gRPC's store and forward).

The op-level program is TensorFlow's synchronous one written in one graph: each worker's tower
computes its gradient, every gradient goes into a ConditionalAccumulator on the variable's PS
task as it arrives, and the PS takes the average of N and applies it (what
SyncReplicasOptimizer does across sessions). The sparse model of the grid is not here: hetbed's
accumulators take dense gradients, so its op-level program would push whole embeddings where
the step-level driver pushes the rows (TF's SparseConditionalAccumulator).
"""

from __future__ import annotations

import pytest

import hetbed as hb
from hetbed.simulator import Cluster, SimSession, sim_value
from hetbed.simulator.profile import profile_from_graph
from hetbed.simulator.training import SyncPS

PS_DEVICE, WORKER = "xeon_e5_2630v3_ps", "xeon_e5_2680v3_2s"  # CPU hosts, as in the grid
MODELS = {  # name: (elements per variable, variables = PS tasks)
    "scalar on 1 PS": (0, 1),
    "scalar on each of 2 PS": (0, 2),
    "dense 1 MB": (1 << 18, 1),
    "dense 10 MB": (10 << 18, 1),
    "dense 100 MB": (100 << 18, 1),
}


def _loss(x, elements: int, n_vars: int):
    """One replica's loss; its variables (``v0``, ``v1``, ...) under the caller's scope."""
    total = 0.0
    for k in range(n_vars):
        shape = [] if elements == 0 else [elements]
        with hb.device(f"/job:ps/task:{k}/device:cpu:0"):
            v = hb.get_variable(f"v{k}", shape, initializer=hb.zeros_initializer())
        total = total + (
            hb.reduce_mean(hb.square(v * x - 1.0)) if elements == 0 else hb.reduce_sum(v * x)
        )
    return total


def _input(elements: int) -> list[int]:
    return [1024] if elements == 0 else [elements]


def op_level(elements: int, n_vars: int, workers: int, nic: str) -> float:
    c = Cluster()
    for k in range(n_vars):
        c.add_task("ps", k, cpu=PS_DEVICE, nic=nic)
    for i in range(workers):
        c.add_task("worker", i, cpu=WORKER, nic=nic)
    with hb.Graph().as_default():
        feeds, applies, grads = {}, [], []
        for t in range(workers):
            with hb.device(f"/job:worker/task:{t}/device:cpu:0"):
                x = hb.placeholder(hb.float32, _input(elements))
                with hb.variable_scope("model", reuse=t > 0):
                    loss = _loss(x, elements, n_vars)
                variables = hb.trainable_variables()
                grads.append(hb.gradients(loss, variables))
                feeds[x] = sim_value(_input(elements))
        updates = []
        for k, v in enumerate(variables):
            with hb.device(f"/job:ps/task:{k}/device:cpu:0"):
                acc = hb.ConditionalAccumulator(hb.float32, v.shape, shared_name=f"acc{k}")
                applies += [acc.apply_grad(g[k], local_step=0) for g in grads]
                opt = hb.train.GradientDescentOptimizer(0.01)
                updates.append(opt.apply_gradients([(acc.take_grad(workers), v)]))
        train = [*updates, *applies]  # targets: no extra op to gather them on one task
        sess = SimSession(c)
        sess.run(hb.global_variables_initializer())
        sess.run(train, feeds)
        return sess.last_record.step_time_s


def step_level(elements: int, n_vars: int, workers: int, nic: str) -> float:
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, _input(elements))
        with hb.variable_scope("model"):
            loss = _loss(x, elements, n_vars)
        train = hb.train.GradientDescentOptimizer(0.01).minimize(loss)
        prof = profile_from_graph(
            train,
            {x: sim_value(_input(elements))},
            worker=WORKER,
            ps=PS_DEVICE,
            ps_tasks=n_vars,
        )
    return SyncPS(prof, workers, 0, n_ps=n_vars, nic=nic).run(8).step_time()


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("nic", ["eth_10g", "eth_100g"])
def test_step_level_and_op_level_agree_within_5_percent(model, nic):
    elements, n_vars = MODELS[model]
    for workers in (1, 2, 4, 8):
        a = op_level(elements, n_vars, workers, nic)
        b = step_level(elements, n_vars, workers, nic)
        assert b == pytest.approx(a, rel=0.05), (model, nic, workers, a, b)
