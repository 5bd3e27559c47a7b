"""``hetbed cluster``: start a PS/worker cluster of local processes, and ``cluster_from_env``.

``launch(["python", "train.py"], num_ps=1, num_workers=2)`` picks free loopback ports, starts one
child process per task with the ``HETBED_CONFIG`` environment variable (JSON, like TF_CONFIG)::

    {"cluster": {"ps": ["127.0.0.1:P0"], "worker": ["127.0.0.1:W0", "127.0.0.1:W1"]},
     "task": {"type": "worker", "index": 1}, "token": "<random>"}

and the same JSON in ``TF_CONFIG``, so that a TF1 program that reads its role from there runs
unchanged (TF ignores the extra ``token`` field). It prefixes every line the children print with
``[ps:0]`` / ``[worker:1]``, waits for all workers to exit, then stops the PS tasks (SIGTERM, then
SIGKILL after a grace period). A task that fails is restarted up to ``restarts`` times, after which
the whole cluster is stopped at once, naming the task and how it ended (no task is left waiting
for a dead peer); ``deadline_s`` bounds the whole run. The cluster token (random by default) is
passed in the environment only (``HETBED_CLUSTER_TOKEN`` and the config's ``token``), never on a
command line, where every local user could read it. It only ever signals the processes it
started, by their pid.
Inside a child, ``cluster_from_env()`` gives the cluster spec, job name and task index for
``hb.train.Server``.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import IO, Any

from ..train.checkpoint import RESTARTED_ENV
from .cluster import ClusterSpec
from .server import TOKEN_ENV

CONFIG_ENV = "HETBED_CONFIG"
#: the same JSON under TensorFlow's name, so that TF1 programs that read TF_CONFIG run unchanged
TF_CONFIG_ENV = "TF_CONFIG"


# ---- inside a task ----------------------------------------------------------------------------


def cluster_from_env(env: Mapping[str, str] | None = None) -> tuple[ClusterSpec, str, int]:
    """(ClusterSpec, job name, task index) of this process, read from ``HETBED_CONFIG`` (or,
    when it is not set, from TensorFlow's ``TF_CONFIG``, which has the same layout).

    Raises ValueError naming the problem when neither variable is set, or the value is not JSON
    or does not name a task of its cluster.
    """
    env = os.environ if env is None else env
    raw = env.get(CONFIG_ENV) or env.get(TF_CONFIG_ENV)
    example = '{"cluster": {"ps": ["127.0.0.1:2222"], ...}, "task": {"type": "ps", "index": 0}}'
    if not raw:
        raise ValueError(
            f"{CONFIG_ENV} is not set (nor {TF_CONFIG_ENV}); start this program with `hetbed "
            f"cluster --ps N --workers M -- python ...` or set {CONFIG_ENV} to JSON like {example}"
        )
    try:
        cfg = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ValueError(f"{CONFIG_ENV} is not valid JSON ({e}): {raw[:200]!r}") from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("cluster"), dict):
        raise ValueError(
            f"{CONFIG_ENV} needs a 'cluster' object (job -> addresses), got {raw[:200]!r}"
        )
    task = cfg.get("task")
    if not isinstance(task, dict) or "type" not in task or "index" not in task:
        raise ValueError(
            f"{CONFIG_ENV} needs a 'task' object with 'type' and 'index', got {task!r}"
        )
    job, index = task["type"], task["index"]
    if not isinstance(index, int) or isinstance(index, bool):
        raise ValueError(f"{CONFIG_ENV}: task index must be an integer, got {index!r}")
    cluster = ClusterSpec(cfg["cluster"])
    if not isinstance(job, str) or job not in cluster.jobs:
        raise ValueError(
            f"{CONFIG_ENV}: task type {job!r} is not a job of the cluster {cluster.jobs}"
        )
    if index not in cluster.task_indices(job):
        raise ValueError(
            f"{CONFIG_ENV}: job {job!r} has tasks {cluster.task_indices(job)}, not task {index}"
        )
    return cluster, job, index


# ---- the launcher -----------------------------------------------------------------------------


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct ports free on ``host`` right now (all held open together while picked)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _pump(src: IO[bytes], dst: IO[str], prefix: str, lock: threading.Lock) -> None:
    for line in iter(src.readline, b""):
        text = line.decode("utf-8", errors="replace").rstrip("\n")
        with lock:
            dst.write(f"{prefix} {text}\n")
            dst.flush()
    src.close()


def _stop(procs: Sequence[subprocess.Popen], grace_s: float) -> None:
    """SIGTERM every process still running, SIGKILL those alive after ``grace_s``."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _how(rc: int) -> str:
    """How a process ended, from its return code."""
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = "an unknown signal"
        return f"was killed by signal {-rc} ({name})"
    return f"exited with status {rc}"


def new_token() -> str:
    """A fresh random cluster token (256 bits)."""
    return secrets.token_hex(32)


def read_token_file(path: str) -> str:
    """The token stored in ``path``; ValueError when the file is readable by other users (it would
    show the token to them) or empty."""
    st = os.stat(path)
    if st.st_mode & 0o077:
        raise ValueError(
            f"token file {path} is readable or writable by other users (mode "
            f"{st.st_mode & 0o777:o}); run `chmod 600 {path}`"
        )
    with open(path) as f:
        token = f.read().strip()
    if not token:
        raise ValueError(f"token file {path} is empty")
    return token


def launch(
    command: Sequence[str],
    num_ps: int,
    num_workers: int,
    token: str | None = None,
    host: str = "127.0.0.1",
    grace_s: float = 5.0,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
    deadline_s: float | None = None,
    restarts: int = 0,
    use_token: bool = True,
) -> int:
    """Run ``command`` as ``num_ps`` PS tasks and ``num_workers`` worker tasks; see the module
    docstring. Returns 0 when every worker exited 0, else 1.

    ``token``: the cluster token (default: a fresh random one unless ``use_token`` is False); it
    reaches the tasks through their environment only, never their command lines. A task that
    fails (a worker exiting non-zero or killed, a PS task ending at all) is started again, on its
    own address, up to ``restarts`` times; after that the launcher stops the whole cluster at
    once and reports on ``stderr`` which task failed and how. ``deadline_s``: stop everything and
    fail when the workers have not all finished by then. Ctrl-C (or SIGTERM) stops every child and
    re-raises KeyboardInterrupt."""
    if not command:
        raise ValueError("no command given; use `hetbed cluster ... -- python x.py`")
    if num_ps < 0 or num_workers < 1:
        raise ValueError(f"need --ps >= 0 and --workers >= 1, got {num_ps}, {num_workers}")
    if restarts < 0 or (deadline_s is not None and not deadline_s > 0):
        raise ValueError(f"need --restart >= 0 and --deadline > 0, got {restarts}, {deadline_s}")
    if token is None and use_token:
        token = new_token()
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    ports = free_ports(num_ps + num_workers, host)
    cluster = {
        "ps": [f"{host}:{p}" for p in ports[:num_ps]],
        "worker": [f"{host}:{p}" for p in ports[num_ps:]],
    }
    if not num_ps:
        del cluster["ps"]
    tasks = [("ps", i) for i in range(num_ps)] + [("worker", i) for i in range(num_workers)]
    lock = threading.Lock()
    procs: dict[tuple[str, int], subprocess.Popen] = {}
    pumps: list[threading.Thread] = []

    def say(msg: str) -> None:
        with lock:
            stderr.write(f"hetbed cluster: {msg}\n")
            stderr.flush()

    def start(job: str, i: int, restart: int = 0) -> None:
        env = dict(os.environ)
        if restart:
            env[RESTARTED_ENV] = str(restart)
        else:
            env.pop(RESTARTED_ENV, None)
        config = json.dumps({"cluster": cluster, "task": {"type": job, "index": i}, "token": token})
        env[CONFIG_ENV] = config
        env[TF_CONFIG_ENV] = config  # TF1 programs read their role from TF_CONFIG
        if token:
            env[TOKEN_ENV] = token
        else:
            env.pop(TOKEN_ENV, None)
        env["PYTHONUNBUFFERED"] = "1"
        p = subprocess.Popen(list(command), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        procs[(job, i)] = p
        for src, dst in ((p.stdout, stdout), (p.stderr, stderr)):
            t = threading.Thread(target=_pump, args=(src, dst, f"[{job}:{i}]", lock), daemon=True)
            t.start()
            pumps.append(t)

    # Ctrl-C and SIGTERM only set a flag that the loop below reads (within 50 ms): an exception
    # raised from a signal handler could land anywhere, inside Popen's bookkeeping as well, and
    # leave a lock held there that stopping the children then waits on for ever
    signalled: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        signalled.append(signum)

    in_main = threading.current_thread() is threading.main_thread()
    old = (
        {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)} if in_main else {}
    )
    failure = None
    try:
        for job, i in tasks:
            if signalled:
                break
            start(job, i)
        left = dict.fromkeys(tasks, restarts)
        finished: set[tuple[str, int]] = set()
        end = time.monotonic() + deadline_s if deadline_s else None
        while failure is None and len(finished) < num_workers and not signalled:
            for (job, i), p in list(procs.items()):
                rc = p.poll()
                if rc is None or (job, i) in finished:
                    continue
                if rc == 0 and job == "worker":
                    finished.add((job, i))
                    continue
                how = _how(rc)
                if left[(job, i)] > 0:
                    left[(job, i)] -= 1
                    n = restarts - left[(job, i)]
                    say(f"{job}:{i} {how}; restarting it ({n} of {restarts})")
                    start(job, i, n)
                else:
                    failure = f"{job}:{i} {how}"
                    break
            if failure is None and end is not None and time.monotonic() > end:
                running = [f"{j}:{i}" for (j, i), p in procs.items() if p.poll() is None]
                failure = (
                    f"the deadline of {deadline_s:g} s passed with workers still running "
                    f"({', '.join(r for r in running if r.startswith('worker'))})"
                )
            if failure is None:
                time.sleep(0.05)
        if failure is not None:
            running = [f"{j}:{i}" for (j, i), p in procs.items() if p.poll() is None]
            say(
                f"{failure}; stopping the cluster ({', '.join(running) or 'nothing'} still running)"
            )
        _stop(list(procs.values()), grace_s)
    except BaseException:
        _stop(list(procs.values()), grace_s)
        raise
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        for t in pumps:
            t.join(timeout=grace_s)
    if signalled:
        raise KeyboardInterrupt
    return 1 if failure is not None else 0


__all__ = [
    "CONFIG_ENV",
    "TF_CONFIG_ENV",
    "cluster_from_env",
    "free_ports",
    "launch",
    "new_token",
    "read_token_file",
]
