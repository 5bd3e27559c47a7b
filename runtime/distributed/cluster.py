"""``ClusterSpec``: the jobs of a cluster and the ``host:port`` address of each of their tasks."""

from __future__ import annotations

import re
from typing import Any

_JOB_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ClusterSpec:
    """Jobs -> task addresses, like TF1's ``tf.train.ClusterSpec``.

    ``ClusterSpec({"ps": ["127.0.0.1:2222"], "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]})``;
    a job may also be a dict ``{task_index: address}`` for sparse task indices. Raises ValueError
    naming the job and value for a malformed spec.
    """

    def __init__(self, cluster: ClusterSpec | dict | None):
        if isinstance(cluster, ClusterSpec):
            self._jobs: dict[str, dict[int, str]] = {j: dict(t) for j, t in cluster._jobs.items()}
            return
        if cluster is None:
            cluster = {}
        if not isinstance(cluster, dict):
            raise TypeError(
                f"ClusterSpec takes a dict of job name -> addresses, got {type(cluster).__name__}"
            )
        self._jobs = {}
        for job, tasks in cluster.items():
            if not isinstance(job, str) or not _JOB_RE.match(job):
                raise ValueError(f"ClusterSpec: bad job name {job!r} (letters, digits, '_')")
            if isinstance(tasks, dict):
                items = list(tasks.items())
            elif isinstance(tasks, (list, tuple)):
                items = list(enumerate(tasks))
            else:
                raise TypeError(
                    f"ClusterSpec job {job!r}: tasks must be a list or a dict of addresses, "
                    f"got {type(tasks).__name__}"
                )
            out: dict[int, str] = {}
            for idx, addr in items:
                if isinstance(idx, str) and idx.isdigit():
                    idx = int(idx)
                if not isinstance(idx, int) or isinstance(idx, bool) or idx < 0:
                    raise ValueError(f"ClusterSpec job {job!r}: bad task index {idx!r}")
                split_address(addr, f"job {job!r} task {idx}")
                out[idx] = addr
            self._jobs[job] = dict(sorted(out.items()))

    @property
    def jobs(self) -> list[str]:
        return list(self._jobs)

    def as_dict(self) -> dict[str, Any]:
        """Job -> list of addresses (dense task indices) or dict index -> address (sparse)."""
        out: dict[str, Any] = {}
        for job, tasks in self._jobs.items():
            dense = list(tasks) == list(range(len(tasks)))
            out[job] = list(tasks.values()) if dense else dict(tasks)
        return out

    def num_tasks(self, job_name: str) -> int:
        return len(self._job(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        return list(self._job(job_name))

    def task_address(self, job_name: str, task_index: int) -> str:
        tasks = self._job(job_name)
        if task_index not in tasks:
            raise ValueError(
                f"no task {task_index} in job {job_name!r}; it has tasks {list(tasks)}"
            )
        return tasks[task_index]

    def job_tasks(self, job_name: str) -> list[str | None]:
        """Addresses of ``job_name``'s tasks by index (None where an index is missing)."""
        tasks = self._job(job_name)
        n = max(tasks) + 1 if tasks else 0
        return [tasks.get(i) for i in range(n)]

    def tasks(self) -> list[tuple[str, int, str]]:
        """(job, task index, address) for every task, jobs in spec order."""
        return [(j, i, a) for j, t in self._jobs.items() for i, a in t.items()]

    def _job(self, job_name: str) -> dict[int, str]:
        if job_name not in self._jobs:
            raise ValueError(f"no job {job_name!r} in the cluster; it has jobs {self.jobs}")
        return self._jobs[job_name]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClusterSpec) and self._jobs == other._jobs

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def __repr__(self) -> str:
        return f"ClusterSpec({self.as_dict()!r})"


def split_address(addr: Any, where: str = "address") -> tuple[str, int]:
    """``"host:port"`` -> (host, port); raises ValueError naming ``where`` and the value."""
    if not isinstance(addr, str):
        raise ValueError(f"{where}: an address is a 'host:port' string, got {addr!r}")
    host, sep, port = addr.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{where}: bad address {addr!r} (expected 'host:port')")
    return host, int(port)
