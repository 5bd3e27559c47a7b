"""``hb.train.Server``: one task of a cluster, serving the worker service over gRPC.

Binding: a server listens on its own address from the cluster spec when that host is loopback
(127.0.0.0/8, ``localhost``, ``::1``). For any other host it refuses to start unless told where
to listen: ``bind_all=True`` listens on every interface (``0.0.0.0``), ``bind_host="10.0.0.5"``
on that one, and only with a token (``allow_unauthenticated=True`` says the network is
trusted): anyone who reaches the port could otherwise run graphs. ``token=`` (default: the
``HETBED_CLUSTER_TOKEN`` environment variable; empty is none) authenticates every call, from
masters and peer tasks alike, by an HMAC in its ``hetbed-auth`` metadata (``rpc.py``): the
token itself is never sent.

Protocols (how tensors this task sends reach other tasks; see ``rpc.py``): ``"grpc+tcp"`` (the
default, ``DEFAULT_PROTOCOL``) streams them over a TCP data channel on the host the gRPC server
binds (a free port, advertised in GetStatus replies; HMAC challenge with the token); ``"grpc"``
streams them as RecvTensor messages over gRPC. Measured on loopback (bench/grpc_transfer.py), the
data channel moves large tensors several times faster than chunked gRPC.
"""

from __future__ import annotations

import ipaddress
import os
import threading
from concurrent import futures
from typing import Any

from ..host_memory import keep_freed_memory
from ..threadname import name_this_thread
from .cluster import ClusterSpec, split_address
from .wire import MAX_TENSOR_BYTES, message_limit
from .worker import Worker

TOKEN_ENV = "HETBED_CLUSTER_TOKEN"
#: ``Server(protocol=None)``: tensors over the TCP data channel (see the module docstring)
DEFAULT_PROTOCOL = "grpc+tcp"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Server:
    """A task of ``cluster`` (``job_name``, ``task_index``) serving its devices to masters.

    Its devices are ``/job:J/replica:0/task:T/device:cpu:0`` (and more per ``config``, a
    ConfigProto). ``target`` is ``"grpc://host:port"`` for ``hb.Session(target)``. Raises
    ValueError for an unknown job/task, an unknown ``protocol`` ("grpc" or "grpc+tcp"), a
    non-loopback address without ``bind_all``/``bind_host``, or a non-loopback bind without a
    cluster token (unless ``allow_unauthenticated``). ``max_message_bytes`` limits one
    gRPC message, ``max_tensor_bytes`` one tensor received from another task.
    """

    def __init__(
        self,
        cluster: ClusterSpec | dict,
        job_name: str | None = None,
        task_index: int | None = None,
        protocol: str | None = None,
        config: Any = None,
        start: bool = True,
        token: str | None = None,
        bind_all: bool = False,
        bind_host: str | None = None,
        max_message_bytes: int | None = None,
        max_workers: int = 32,
        max_tensor_bytes: int = MAX_TENSOR_BYTES,
        allow_unauthenticated: bool = False,
    ):
        keep_freed_memory()  # (runtime/host_memory.py)
        if protocol is None:
            protocol = DEFAULT_PROTOCOL
        if protocol not in ("grpc", "grpc+tcp"):
            raise ValueError(
                f"Server: protocol {protocol!r} is not supported; use 'grpc+tcp' or 'grpc'"
            )
        self.protocol = protocol
        self._max_tensor_bytes = int(max_tensor_bytes)
        self.cluster = ClusterSpec(cluster)
        if job_name is None:
            jobs = self.cluster.jobs
            if len(jobs) != 1:
                raise ValueError(f"Server: pass job_name (the cluster has jobs {jobs})")
            job_name = jobs[0]
        if task_index is None:
            task_index = 0
        self.job_name, self.task_index = job_name, int(task_index)
        address = self.cluster.task_address(job_name, self.task_index)
        host, port = split_address(address, f"job {job_name!r} task {task_index}")
        if bind_host is None:
            if bind_all:
                bind_host = "0.0.0.0"
            elif is_loopback(host):
                bind_host = host
            else:
                raise ValueError(
                    f"Server {job_name}:{task_index}: refusing to listen on non-loopback address "
                    f"{address!r}; pass bind_all=True (all interfaces) or bind_host=... and set a "
                    "cluster token"
                )
        # (an empty token is none: no call is authenticated then)
        self._token = (token if token is not None else os.environ.get(TOKEN_ENV)) or None
        if self._token is None and not is_loopback(bind_host) and not allow_unauthenticated:
            # a server without a token runs any graph it is sent, file reads and writes too
            raise ValueError(
                f"Server {job_name}:{task_index}: refusing to serve on {bind_host!r} without a "
                f"cluster token: anyone who can reach it could run graphs and read or write "
                f"files as this user; pass token=... (or set {TOKEN_ENV}), or "
                "allow_unauthenticated=True on a network you trust"
            )
        self._max_bytes = message_limit(max_message_bytes)
        self.task_name = f"/job:{job_name}/replica:0/task:{self.task_index}"
        from ...devices import local_devices

        self._peers: dict[str, Any] = {}
        self._peers_lock = threading.Lock()
        self.worker = Worker(self.task_name, local_devices(config, self.task_name), self._peer)
        self.worker.cluster = self.cluster
        import grpc  # imported here so that `import hetbed` does not load gRPC

        from .datachannel import DataServer
        from .grpc_server import TokenInterceptor, service_handler
        from .rpc import CallAuthenticator, channel_options

        auth = CallAuthenticator(self._token.encode(), self.task_name) if self._token else None

        self._data = (
            DataServer(
                self.worker,
                bind_host,
                self._token,
                self._max_bytes,
                frozenset(int(split_address(a)[1]) for _, _, a in self.cluster.tasks()),
                self._max_tensor_bytes,
            )
            if protocol != "grpc"
            else None
        )
        self._server = grpc.server(
            futures.ThreadPoolExecutor(
                max_workers=max_workers,
                thread_name_prefix="hetbed-rpc",
                initializer=name_this_thread,
                initargs=("hetbed-rpc",),
            ),
            # gRPC turns SO_REUSEPORT on by default: two servers would then share a port, a
            # stale task and its replacement splitting the workers' calls; a port in use fails
            options=[*channel_options(self._max_bytes), ("grpc.so_reuseport", 0)],
            interceptors=[TokenInterceptor(auth)] if auth is not None else None,
        )
        handler = service_handler(
            self.worker, auth, self._max_bytes, self._data.port if self._data else None
        )
        self._server.add_generic_rpc_handlers((handler,))
        bind = f"[{bind_host}]" if ":" in bind_host else bind_host
        try:
            self._port = self._server.add_insecure_port(f"{bind}:{port}")
        except RuntimeError:  # gRPC's answer for a port in use
            if self._data is not None:
                self._data.stop()
            raise ValueError(
                f"Server {self.task_name}: cannot listen on {bind}:{port}: the address is in use "
                "(another server, perhaps a task left from an earlier run?)"
            ) from None
        except BaseException:
            self._port = 0
            if self._data is not None:
                self._data.stop()
            raise
        if self._port == 0:
            if self._data is not None:
                self._data.stop()
            raise ValueError(f"Server {self.task_name}: cannot listen on {bind}:{port}")
        self._address = f"[{host}]:{self._port}" if ":" in host else f"{host}:{self._port}"
        if port == 0:  # a free port was asked for: the cluster spec now names the real one
            self.cluster._jobs[job_name][self.task_index] = self._address
        self._started = False
        self._stopped = threading.Event()
        if start:
            self.start()

    @property
    def target(self) -> str:
        """``grpc://host:port`` of this task, for ``hb.Session(target)``."""
        host, _ = split_address(self._address)
        host = f"[{host}]" if ":" in host else host
        return f"grpc://{host}:{self._port}"

    @property
    def server_def(self) -> dict:
        return {
            "cluster": self.cluster.as_dict(),
            "job_name": self.job_name,
            "task_index": self.task_index,
            "protocol": self.protocol,
        }

    def start(self) -> None:
        if not self._started:
            if self._data is not None:
                self._data.start()
            self._server.start()
            self._started = True

    def join(self, timeout: float | None = None) -> None:
        """Block until the server stops (``stop()`` from another thread, or shutdown)."""
        self._stopped.wait(timeout)

    def stop(self, grace: float | None = 0.5) -> None:
        """Stop serving, abort running steps, close peer channels and the devices."""
        if self._stopped.is_set():
            return
        self.worker.close()
        if self._data is not None:
            self._data.stop()
        self._server.stop(grace).wait()
        with self._peers_lock:
            peers, self._peers = self._peers, {}
        for p in peers.values():
            p.close()
        self._stopped.set()

    def _peer(self, task: str) -> Any:
        with self._peers_lock:
            client = self._peers.get(task)
            if client is None:
                from ...devices.naming import DeviceSpec
                from .client import WorkerClient

                spec = DeviceSpec.from_string(task)
                if spec.job is None or spec.task is None:
                    raise ValueError(f"rendezvous names task {task!r}, which is not a task name")
                address = self.cluster.task_address(spec.job, spec.task)
                client = self._peers[task] = WorkerClient(
                    address, task, self._token, self._max_bytes, self._max_tensor_bytes
                )
            return client

    @staticmethod
    def create_local_server(config: Any = None, start: bool = True, **kw: Any) -> Server:
        """A one-task cluster (job ``localhost``) on a free loopback port."""
        return Server(
            {"localhost": ["127.0.0.1:0"]}, "localhost", 0, config=config, start=start, **kw
        )

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
