"""Fault tolerance of the gRPC runtime with real processes killed by SIGKILL: a backup worker
lets sync training go on, a dead PS fails the workers promptly, a chief killed while saving
leaves a restorable newest checkpoint.

Each test starts its PS and worker processes itself (``hetbed cluster`` stops every task when one
fails, which is what these tests must avoid) with ``HETBED_CONFIG`` as the launcher sets it, and
kills only those processes, by pid, at the end.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.distributed.launcher import CONFIG_ENV, free_ports

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Linear regression, 1 PS + N workers, SyncReplicasOptimizer(2 of total) through
# MonitoredTrainingSession. Every worker prints the global step after each of its steps; an error
# is printed as "ERROR <class>: <message>" with exit status 3.
SYNC = textwrap.dedent(
    """
    import sys

    import numpy as np

    import hetbed as hb

    last_step, total = int(sys.argv[1]), int(sys.argv[2])
    cluster, job, index = hb.train.cluster_from_env()
    server = hb.train.Server(cluster, job, index)
    print(f"pid {__import__('os').getpid()}", flush=True)
    if job == "ps":
        server.join()
        sys.exit(0)
    rng = np.random.default_rng(index)
    x_np = rng.normal(size=(16, 3)).astype(np.float32)
    y_np = x_np @ np.array([[1.0], [-2.0], [0.5]], np.float32)
    g = hb.Graph()
    setter = hb.train.replica_device_setter(
        cluster=cluster, worker_device=f"/job:worker/task:{index}"
    )
    with g.as_default():
        with hb.device(setter):
            step = hb.train.get_or_create_global_step()
            w = hb.Variable(np.zeros((3, 1), np.float32), name="w")
            loss = hb.reduce_mean(hb.square(hb.matmul(hb.constant(x_np), w) - hb.constant(y_np)))
            opt = hb.train.SyncReplicasOptimizer(
                hb.train.GradientDescentOptimizer(0.05), 2, total_num_replicas=total
            )
            train = opt.minimize(loss, global_step=step)
        hooks = [
            opt.make_session_run_hook(is_chief=(index == 0)),
            hb.train.StopAtStepHook(last_step=last_step),
        ]
        config = hb.ConfigProto(operation_timeout_in_ms=20000)
        try:
            with hb.train.MonitoredTrainingSession(
                master=server.target, is_chief=(index == 0), hooks=hooks, config=config
            ) as sess:
                while not sess.should_stop():
                    sess.run(train)
                    print(f"step {int(sess.raw_session().run(step))}", flush=True)
                print(f"done {int(sess.raw_session().run(step))}", flush=True)
        except hb.errors.OpError as e:
            print(f"ERROR {type(e).__name__}: {e}", flush=True)
            sys.exit(3)
    server.stop()
    """
)

# The chief alone (1 PS + 1 worker): every step sets the global step and every element of a
# 256x256 variable to the same number, and MonitoredTrainingSession saves every step.
SAVER = textwrap.dedent(
    """
    import sys

    import numpy as np

    import hetbed as hb

    ckpt_dir = sys.argv[1]
    cluster, job, index = hb.train.cluster_from_env()
    server = hb.train.Server(cluster, job, index)
    print(f"pid {__import__('os').getpid()}", flush=True)
    if job == "ps":
        server.join()
        sys.exit(0)
    g = hb.Graph()
    setter = hb.train.replica_device_setter(cluster=cluster, worker_device="/job:worker/task:0")
    with g.as_default():
        with hb.device(setter):
            step = hb.train.get_or_create_global_step()
            big = hb.Variable(np.zeros((256, 256), np.float32), name="big")
            inc = hb.assign_add(step, 1)
            train = hb.assign(big, hb.fill([256, 256], hb.cast(inc, hb.float32)))
        with hb.train.MonitoredTrainingSession(
            master=server.target, is_chief=True, checkpoint_dir=ckpt_dir, save_checkpoint_steps=1
        ) as sess:
            print(f"start {int(sess.raw_session().run(step))}", flush=True)
            while True:
                sess.run(train)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is not running
        return f.read().split(")")[-1].split()[0] != "Z"


class _Cluster:
    """PS and worker processes of one script, each writing its output to ``<job><i>.log``."""

    def __init__(self, tmp_path, script: str, args: list[str], num_workers: int):
        self.dir = tmp_path
        path = tmp_path / "task.py"
        path.write_text(script)
        ports = free_ports(1 + num_workers)
        self.spec = {
            "ps": [f"127.0.0.1:{ports[0]}"],
            "worker": [f"127.0.0.1:{p}" for p in ports[1:]],
        }
        self.command = [sys.executable, str(path), *args]
        self.procs: dict[str, subprocess.Popen] = {}
        self.start("ps", 0)
        for i in range(num_workers):
            self.start("worker", i)

    def start(self, job: str, index: int) -> subprocess.Popen:
        env = dict(os.environ)
        env[CONFIG_ENV] = json.dumps(
            {"cluster": self.spec, "task": {"type": job, "index": index}, "token": None}
        )
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
        log = open(self.dir / f"{job}{index}.log", "a")  # noqa: SIM115 - closed by the child
        try:
            p = subprocess.Popen(
                self.command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.dir
            )
        finally:
            log.close()
        self.procs[f"{job}{index}"] = p
        return p

    def log(self, task: str) -> str:
        return (self.dir / f"{task}.log").read_text()

    def logs(self) -> str:
        return "\n".join(f"--- {t}\n{self.log(t)}" for t in self.procs)

    def steps(self, task: str) -> list[int]:
        return [int(s) for s in re.findall(r"^step (\d+)$", self.log(task), re.M)]

    def wait_for(self, cond, what: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not cond():
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout_s} s waiting for {what}:\n{self.logs()}")
            time.sleep(0.05)

    def kill(self, task: str) -> None:
        p = self.procs[task]
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=10)

    def close(self) -> None:
        """SIGKILL every process still running that this cluster started (by pid)."""
        for p in self.procs.values():
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
        for p in self.procs.values():
            p.wait(timeout=10)
        assert not any(_alive(p.pid) for p in self.procs.values())


@pytest.fixture
def make_cluster(tmp_path):
    made = []

    def make(script: str, args: list[str], num_workers: int) -> _Cluster:
        c = _Cluster(tmp_path, script, args, num_workers)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def test_sync_training_with_a_backup_worker_survives_a_killed_worker(make_cluster):
    """2 of 3 sync replicas aggregate: after worker 2 is SIGKILLed the other two reach the last
    global step and exit 0."""
    last = 25
    c = make_cluster(SYNC, [str(last), "3"], num_workers=3)
    c.wait_for(lambda: max(c.steps("worker0"), default=0) >= 4, "global step 4", 20)
    c.kill("worker2")
    killed_at = max(c.steps("worker0"))
    for w in ("worker0", "worker1"):
        try:
            rc = c.procs[w].wait(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{w} did not finish within 20 s:\n{c.logs()}")
        assert rc == 0, c.logs()
        done = re.search(r"^done (\d+)$", c.log(w), re.M)
        assert done is not None and int(done.group(1)) >= last, c.logs()
    assert killed_at < last
    assert c.procs["worker2"].returncode == -signal.SIGKILL


def test_killing_the_ps_fails_the_workers_promptly(make_cluster):
    """SIGKILL of the only PS makes every worker's step fail with an OpError naming the PS task
    within 15 s, instead of hanging."""
    c = make_cluster(SYNC, ["1000000", "2"], num_workers=2)
    c.wait_for(lambda: max(c.steps("worker1"), default=0) >= 3, "global step 3", 20)
    c.kill("ps0")
    t0 = time.monotonic()
    for w in ("worker0", "worker1"):
        try:
            rc = c.procs[w].wait(timeout=max(0.1, 15 - (time.monotonic() - t0)))
        except subprocess.TimeoutExpired:
            pytest.fail(f"{w} still running 15 s after the PS was killed:\n{c.logs()}")
        assert rc == 3, c.logs()
        err = re.search(r"^ERROR (\w+): (.*)$", c.log(w), re.M)
        assert err is not None, c.logs()
        assert err.group(1) in ("UnavailableError", "AbortedError"), c.logs()
        assert "/job:ps/replica:0/task:0" in err.group(2), c.logs()


def _restore(path: str) -> tuple[int, np.ndarray]:
    """(global step, big) restored from ``path`` into a fresh local graph."""
    with hb.Graph().as_default():
        step = hb.train.get_or_create_global_step()
        big = hb.Variable(np.zeros((256, 256), np.float32), name="big")
        saver = hb.train.Saver()
        with hb.Session() as sess:
            saver.restore(sess, path)
            return int(sess.run(step)), sess.run(big)


def test_chief_killed_while_saving_every_step_leaves_a_restorable_checkpoint(
    make_cluster, tmp_path
):
    """SIGKILL of a chief saving every step, three times at random moments (often mid-write): the
    newest checkpoint and every one the index lists restore whole (big == its step), temporary
    files are never listed, and the restarted chief resumes from the newest."""
    ckpt = tmp_path / "ckpt"
    c = make_cluster(SAVER, [str(ckpt)], num_workers=1)
    rng = np.random.default_rng(0)
    previous = 0
    for round_ in range(3):
        if round_:
            c.start("worker", 0)

        def starts():
            return [int(s) for s in re.findall(r"^start (\d+)$", c.log("worker0"), re.M)]

        c.wait_for(lambda r=round_: len(starts()) > r, "the chief to start", 20)
        start = starts()[-1]
        assert start == previous, c.logs()

        def saved(start=start):
            latest = hb.train.latest_checkpoint(str(ckpt))
            return latest is not None and int(latest.rsplit("-", 1)[1]) >= start + 3

        c.wait_for(saved, "3 more checkpoints", 20)
        time.sleep(float(rng.uniform(0.0, 0.3)))
        c.kill("worker0")
        latest = hb.train.latest_checkpoint(str(ckpt))
        assert latest is not None and not os.path.basename(latest).startswith("."), latest
        n = int(latest.rsplit("-", 1)[1])
        assert n >= start + 3
        got_step, got_big = _restore(latest)
        assert got_step == n
        np.testing.assert_array_equal(got_big, np.full((256, 256), n, np.float32))
        for p in hb.train.get_checkpoint_state(str(ckpt)).all_model_checkpoint_paths:
            k = int(p.rsplit("-", 1)[1])
            assert not os.path.basename(p).startswith(".") and _restore(p)[0] == k
        # files are renamed into place whole, the index after them: the newest file on disk
        # (killed before the index named it) restores too, and is at most one step ahead
        on_disk = [int(f.rsplit("-", 1)[1]) for f in os.listdir(ckpt) if f.startswith("model")]
        assert n <= max(on_disk) <= n + 1
        assert _restore(str(ckpt / f"model.ckpt-{max(on_disk)}"))[0] == max(on_disk)
        previous = n
