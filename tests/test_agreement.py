"""The two simulators agree: for the models of the cluster-fidelity grid
(``scenarios/models/grid.py``: one scalar per PS task, one dense variable of 1, 10 and 100 MB,
32 rows of an embedding: only the rows travel, accumulated by a SparseConditionalAccumulator),
1 to 8 workers and no stragglers, the step-level SyncPS driver (a profile of one replica) and an
op-level simulation of the replicated synchronous graph give step times within 5% of each other
where bandwidth matters, within 12% where every transfer is a small message (see TOLERANCE).

The workers are CPU hosts, as in the grid (`hetbed cluster` on one machine): with a GPU behind
the NIC the two differ by design, the op-level flow crossing NIC and PCIe at once where the
step-level driver adds the profile's host-to-GPU copy after the network transfer (gRPC's store
and forward).

The op-level simulation is one step from idle, every client starting at once; the step-level
driver's median is a steady state, where the workers' steps are staggered and one step's tail
(replies, tokens) overlaps the next one's start. Compared like with like, the step-level
driver's own first step from idle, as its clients see it (``grid.step_level_step(first=True)``:
until the last worker's first call has returned), agrees with the op-level step within 5%
(FIRST_TOLERANCE): the difference between the two simulations at small messages is the steady
state's overlap, not their costs.
"""

from __future__ import annotations

import pytest

from hetbed.scenarios.models import grid

PS, WORKER = "xeon_e5_2630v3_ps", "xeon_e5_2680v3_2s"
CASES = [
    ("scalar", 1),
    ("scalar", 2),
    ("dense_1mb", 1),
    ("dense_10mb", 1),
    ("dense_100mb", 1),
    ("sparse", 1),
]


#: how far apart they may be: 5%, except where the step is bound by the messages' CPU time (the
#: scalar models, whose every byte is a message: RunGraph and RecvTensor calls, the local step
#: and the token of SyncReplicasOptimizer). There the op-level simulation, one step at a time,
#: pays the first requests and the last replies of a step in full, where the step-level
#: driver's steady state overlaps them with the neighbouring steps of other workers: the
#: op-level step is up to ~1.5 messages' time per worker longer at 4-8 workers (measured 9-11%
#: on these hosts), and the drivers' order of the messages within a step differs (up to 7%).
#: 1 MB is in between (at 100 GbE, 80 us on the wire against some 20 messages of 20 us each).
#: The sparse model moves 8 KB of rows a step: its messages dominate as the scalar's do.
TOLERANCE = {"scalar": 0.12, "dense_1mb": 0.08, "sparse": 0.12}


#: how far the step-level driver's first step may be from the op-level step: 5%, except with
#: several PS tasks and four workers starting at once (+8%), where the step-level driver books
#: each worker's request messages at a PS task as one unit (its RunGraph call, its local step
#: and its reads) and the op-level simulation handles every worker's RunGraph call before the
#: reads that follow them
FIRST_TOLERANCE = {("scalar", 2, 4): 0.09}


@pytest.mark.parametrize("model, n_ps", CASES)
@pytest.mark.parametrize("nic", ["eth_10g", "eth_100g"])
def test_step_level_and_op_level_agree(model, n_ps, nic):
    for workers in (1, 2, 4, 8):
        a = grid.op_level_step(model, workers, n_ps, nic, WORKER, PS)
        b = grid.step_level_step(model, workers, n_ps, nic, WORKER, PS)
        rel = TOLERANCE.get(model, 0.05)
        assert b == pytest.approx(a, rel=rel), (model, n_ps, nic, workers, a, b)
        first = grid.step_level_step(model, workers, n_ps, nic, WORKER, PS, first=True)
        rel = FIRST_TOLERANCE.get((model, n_ps, workers), 0.05)
        assert first == pytest.approx(a, rel=rel), ("first", model, n_ps, nic, workers, a, first)


def test_first_step_is_the_first_calls_return():
    """``first=True`` is when the last worker starts its second step: after its first step's
    replies, later than the first step's update and than any step's median."""
    first = grid.step_level_step("scalar", 4, 1, "eth_10g", WORKER, PS, first=True)
    steady = grid.step_level_step("scalar", 4, 1, "eth_10g", WORKER, PS)
    assert first > steady > 0
    with pytest.raises(ValueError, match="first"):
        grid.step_level_step("scalar", 4, 1, "eth_10g", WORKER, PS, mode="async", first=True)
