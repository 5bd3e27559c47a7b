"""hetbed.simulator: a SimPy cluster (hosts, links, flows) that runs hetbed graphs."""

from hetbed.simulator.cluster import Cluster
from hetbed.simulator.network import Link, Network
from hetbed.simulator.session import RunRecord, SimRendezvous, SimSession, sim_value
from hetbed.simulator.topology import Fabric, Host, Nic, SwitchFabric, TwoLevelFabric

__all__ = [
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
    "sim_value",
]
