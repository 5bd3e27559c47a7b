"""The distributed runtime over gRPC: cluster specs, task servers, and the master session.

gRPC code stays in this package and only translates messages (``rpc.py``); the worker service
itself (``worker.py``) is transport-neutral.
"""

from .cluster import ClusterSpec
from .master import DistributedSession
from .server import Server
from .wire import InternalError, UnauthenticatedError, UnavailableError

__all__ = [
    "ClusterSpec",
    "DistributedSession",
    "InternalError",
    "Server",
    "UnauthenticatedError",
    "UnavailableError",
]
