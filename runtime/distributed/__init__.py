"""The distributed runtime over gRPC: cluster specs, task servers, and the master session.

gRPC code stays in this package and only translates messages (``rpc.py``); the worker service
itself (``worker.py``) is transport-neutral.
"""

from ..errors import InternalError, UnauthenticatedError, UnavailableError
from .cluster import ClusterSpec
from .master import DistributedSession
from .server import Server

__all__ = [
    "ClusterSpec",
    "DistributedSession",
    "InternalError",
    "Server",
    "UnauthenticatedError",
    "UnavailableError",
]
