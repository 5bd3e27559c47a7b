"""hetbed.simulator: a SimPy cluster (hosts, links, flows) that runs hetbed graphs."""

from hetbed.simulator.cluster import Cluster
from hetbed.simulator.concurrent import run_clients
from hetbed.simulator.failures import Failure
from hetbed.simulator.hybrid import HybridLearner
from hetbed.simulator.network import Link, Network
from hetbed.simulator.records import RunRecord
from hetbed.simulator.rendezvous import SimRendezvous
from hetbed.simulator.session import SimSession, sim_value
from hetbed.simulator.topology import Fabric, Host, Nic, SwitchFabric, TwoLevelFabric
from hetbed.simulator.training import (
    AllReduceRing,
    AsyncPS,
    ReplicaProfile,
    SyncPS,
    TrainingResult,
    normalized_speedup,
    profile_from_graph,
)

__all__ = [
    "AllReduceRing",
    "AsyncPS",
    "Failure",
    "HybridLearner",
    "ReplicaProfile",
    "SyncPS",
    "TrainingResult",
    "normalized_speedup",
    "profile_from_graph",
    "Cluster",
    "Fabric",
    "Host",
    "Link",
    "Network",
    "Nic",
    "RunRecord",
    "SimRendezvous",
    "SimSession",
    "SwitchFabric",
    "TwoLevelFabric",
    "run_clients",
    "sim_value",
]
