"""Fault tolerance of the gRPC runtime with real processes killed by SIGKILL: a backup worker
lets sync training go on; without one, a killed chief makes the other workers' steps fail after
the operation timeout until it is restarted and rejoins; a killed PS makes the workers recover
(MonitoredTrainingSession recreates its session) and resume from the last checkpoint once the PS
is back, or fail after the recovery timeout when it stays down; a chief killed while saving
leaves a restorable newest checkpoint.

Each test starts its PS and worker processes itself (``hetbed cluster`` stops every task when one
fails, which is what these tests must avoid) with ``HETBED_CONFIG`` as the launcher sets it, and
kills only those processes, by pid, at the end.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import hetbed as hb
from hetbed.runtime.distributed.launcher import CONFIG_ENV, free_ports
from hetbed.scenarios import datasets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS_DIR = os.path.join(ROOT, "tests")

# Linear regression, 1 PS + N workers, SyncReplicasOptimizer through MonitoredTrainingSession.
# Arguments: last step, replicas to aggregate, total replicas, operation timeout (ms), checkpoint
# dir ("-": none), recovery timeout (s). Every worker prints "start <global step>" once its
# session is ready and the global step read in each of its steps (fetched through the monitored
# session, which recovers from a failed PS; its raw session would not). A step that fails with
# DeadlineExceededError prints "ERROR <class>: <message>" and is run again (as a TF1 program's
# retry loop would); any other error prints "FATAL <class>: <message>" and exits with status 3.
SYNC = textwrap.dedent(
    """
    import sys

    import numpy as np

    import hetbed as hb

    last_step, aggregate, total, timeout_ms = (int(a) for a in sys.argv[1:5])
    ckpt_dir, init_timeout_s = sys.argv[5], float(sys.argv[6])
    go = sys.argv[7] if len(sys.argv) > 7 else None  # a file the test creates to start training
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
                hb.train.GradientDescentOptimizer(0.05), aggregate, total_num_replicas=total
            )
            train = opt.minimize(loss, global_step=step)
        hooks = [
            opt.make_session_run_hook(is_chief=(index == 0)),
            hb.train.StopAtStepHook(last_step=last_step),
        ]
        config = hb.ConfigProto(operation_timeout_in_ms=timeout_ms)
        try:
            with hb.train.MonitoredTrainingSession(
                master=server.target,
                is_chief=(index == 0),
                checkpoint_dir=None if ckpt_dir == "-" else ckpt_dir,
                save_checkpoint_steps=5,
                hooks=hooks,
                config=config,
                init_timeout_s=init_timeout_s,
            ) as sess:
                print(f"start {int(sess.raw_session().run(step))}", flush=True)
                while go and not __import__("os").path.exists(go):
                    __import__("time").sleep(0.01)
                while not sess.should_stop():
                    try:
                        _, now = sess.run([train, step])
                    except hb.errors.DeadlineExceededError as e:
                        print(f"ERROR {type(e).__name__}: {e}", flush=True)
                        continue
                    print(f"step {now}", flush=True)
                print(f"done {int(sess.raw_session().run(step))}", flush=True)
        except hb.errors.OpError as e:
            print(f"FATAL {type(e).__name__}: {e}", flush=True)
            sys.exit(3)
    server.stop()
    """
)

# The digits MLP of digits_mlp_task.py, 1 PS + 2 asynchronous workers, the chief saving a
# checkpoint every 50 global steps. Arguments: checkpoint dir, last step. Every worker prints the
# global step read in each of its steps, then "done <global step> recoveries <n>".
MLP = textwrap.dedent(
    """
    import sys

    import numpy as np

    import digits_mlp_task  # the tests copy it next to this script
    import hetbed as hb

    ckpt_dir, last_step = sys.argv[1], int(sys.argv[2])
    cluster, job, index = hb.train.cluster_from_env()
    server = hb.train.Server(cluster, job, index)
    print(f"pid {__import__('os').getpid()}", flush=True)
    if job == "ps":
        server.join()
        sys.exit(0)
    m = digits_mlp_task.build(cluster, index, last_step)
    data, x_train, x, y, step = m.data, m.x_train, m.x, m.y, m.step
    with m.g.as_default():
        with hb.device(m.setter):
            train = m.opt.minimize(m.loss, global_step=step)
        rng = np.random.default_rng(index)
        with hb.train.MonitoredTrainingSession(
            master=server.target,
            is_chief=(index == 0),
            checkpoint_dir=ckpt_dir,
            save_checkpoint_steps=50,
            hooks=[hb.train.StopAtStepHook(last_step=last_step)],
            init_timeout_s=30,
        ) as sess:
            while not sess.should_stop():
                idx = rng.integers(0, len(x_train), 128)
                _, now = sess.run([train, step], {x: x_train[idx], y: data.y_train[idx]})
                print(f"step {now}", flush=True)
            done = int(sess.raw_session().run(step))
            print(f"done {done} recoveries {sess.recoveries}", flush=True)
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
        shutil.copy(os.path.join(TESTS_DIR, "digits_mlp_task.py"), tmp_path)
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

    def start(self, job: str, index: int, **extra_env: str) -> subprocess.Popen:
        env = {**os.environ, **extra_env}
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

    def finish(self, task: str, timeout_s: float, when: str = "") -> int:
        """``task``'s exit code; fails the test naming ``when`` if it runs ``timeout_s`` more."""
        try:
            return self.procs[task].wait(timeout=max(0.1, timeout_s))
        except subprocess.TimeoutExpired:
            pytest.fail(f"{task} did not finish within {timeout_s:.0f} s{when}:\n{self.logs()}")

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


def test_sync_training_with_a_backup_worker_survives_a_killed_worker(make_cluster, tmp_path):
    """2 of 3 sync replicas aggregate: after worker 2 is SIGKILLed the other two reach the last
    global step and exit 0, no step of theirs failing. (Training starts once all three have
    their sessions: on a loaded machine the chief, contributing twice a step, could otherwise
    finish before a slow worker 1 has connected, and that one then finds the chief gone.)"""
    last = 25
    go = tmp_path / "go"
    c = make_cluster(SYNC, [str(last), "2", "3", "20000", "-", "20", str(go)], num_workers=3)
    c.wait_for(lambda: all("start" in c.log(f"worker{i}") for i in range(3)), "all up", 30)
    go.write_text("")
    c.wait_for(lambda: max(c.steps("worker0"), default=0) >= 4, "global step 4", 20)
    c.kill("worker2")
    killed_at = max(c.steps("worker0"))
    for w in ("worker0", "worker1"):
        assert c.finish(w, 20) == 0, c.logs()
        done = re.search(r"^done (\d+)$", c.log(w), re.M)
        assert done is not None and int(done.group(1)) >= last, c.logs()
        assert "ERROR" not in c.log(w), c.logs()
    assert killed_at < last
    assert c.procs["worker2"].returncode == -signal.SIGKILL


def test_sync_without_backup_goes_on_after_a_killed_non_chief_fails_a_step(make_cluster):
    """2 of 2, operation timeout 2 s, SIGKILL of worker 1: worker 0 reaches the last step alone.
    Its step may wait for the missing gradient and fail after 2 s with DeadlineExceededError
    (never another error); run again, it pushes a fresh gradient that completes the aggregate,
    since, as in TF, tokens and gradients are not tied to a worker."""
    last = 40
    c = make_cluster(SYNC, [str(last), "2", "2", "2000", "-", "20"], num_workers=2)
    c.wait_for(lambda: max(c.steps("worker0"), default=0) >= 4, "global step 4", 20)
    c.kill("worker1")
    assert c.finish("worker0", 30) == 0, c.logs()
    done = re.search(r"^done (\d+)$", c.log("worker0"), re.M)
    assert done is not None and int(done.group(1)) >= last, c.logs()
    errors = re.findall(r"^ERROR (\w+): (.*)$", c.log("worker0"), re.M)
    assert len(errors) <= 3, c.logs()
    for cls, msg in errors:
        assert cls == "DeadlineExceededError" and "Dequeue" in msg, c.logs()


def test_killed_chief_without_backup_fails_steps_after_the_deadline_and_rejoins(
    make_cluster, tmp_path
):
    """Sync 2 of 2, operation timeout 2 s, SIGKILL of the chief (whose thread applies the
    updates): the other worker's steps fail with DeadlineExceededError naming its task, the
    2 s, and the token it waited for from the PS, within 12 s (no hang), and it retries. The
    chief restarted as the same task on the same port restores its newest checkpoint, and both
    workers reach the last step."""
    last = 60
    ckpt, go = tmp_path / "ckpt", tmp_path / "go"
    c = make_cluster(SYNC, [str(last), "2", "2", "2000", str(ckpt), "20", str(go)], num_workers=2)
    # both workers train from the start: on a loaded machine the chief alone (two gradients
    # per global step) could otherwise finish before worker 1 has joined
    c.wait_for(lambda: all("start" in c.log(w) for w in ("worker0", "worker1")), "both up", 30)
    go.write_text("")
    c.wait_for(lambda: len(c.steps("worker1")) >= 3 and max(c.steps("worker1")) >= 8, "step 8", 20)
    assert "done" not in c.log("worker0"), c.logs()
    c.kill("worker0")
    t_kill = time.monotonic()
    # what the restarted chief will restore: the newest checkpoint that verifies, also one the
    # kill left outside the index (between the data file's rename and the index's)
    saved = hb.train.recover_checkpoint(str(ckpt))
    assert saved is not None
    c.wait_for(lambda: "ERROR" in c.log("worker1"), "worker 1's step to fail", 12)
    err = re.search(r"^ERROR (\w+): (.*)$", c.log("worker1"), re.M)
    assert err.group(1) == "DeadlineExceededError", c.logs()
    msg = err.group(2)
    # whichever part times out first (the PS's dequeue, the worker's Recv of the token, or the
    # PS's RecvTensor serving it) names its task, the 2 s and the token dequeued on the PS
    assert re.search(r"^RunGraph on /job:(ps|worker)/replica:0/task:(0|1) ", msg), msg
    # (the RecvTensor's budget is what is left of the 2 s: all of it, or a little less)
    assert re.search(r"(timed out after 2\.0 s waiting for: |not sent within (2|1\.9\d*) s)", msg)
    assert re.search(r"Dequeue.*/job:ps/replica:0/task:0/device:cpu:0|/job:ps.*Dequeue:0", msg)
    assert time.monotonic() - t_kill >= 1.0
    assert c.procs["worker1"].poll() is None  # it retries instead of giving up
    before = len(c.steps("worker1"))
    c.start("worker", 0, HETBED_RESTARTED="1")  # (as hetbed cluster --restart marks it)
    for w in ("worker0", "worker1"):
        assert c.finish(w, 40, " of the restart") == 0, c.logs()
        done = re.search(r"^done (\d+)$", c.log(w), re.M)
        assert done is not None and int(done.group(1)) >= last, c.logs()
    starts = [int(s) for s in re.findall(r"^start (\d+)$", c.log("worker0"), re.M)]
    # restored from the newest checkpoint, as its log says (the global step it then prints
    # may be past it: worker 1 alone fills the accumulators, two gradients an update, once
    # the restarted chief's thread applies them, however long the chief takes to print)
    n = int(saved.rsplit("-", 1)[1])
    assert f"MonitoredTrainingSession (chief): restored {saved}" in c.log("worker0"), c.logs()
    assert len(starts) == 2 and starts[0] == 0 and n <= starts[1], (starts, n)
    assert len(c.steps("worker1")) > before  # worker 1 trained alongside the restarted chief
    assert "FATAL" not in c.logs()


def _accuracy(ckpt_path: str) -> float:
    """Test accuracy of the MLP restored from a checkpoint file (numpy); every value finite."""
    reader = hb.train.load_checkpoint(ckpt_path)
    p = {n: reader.get_tensor(n) for n in ("w1", "b1", "w2", "b2")}
    assert all(np.isfinite(v).all() for v in p.values())
    d = datasets.digits()
    mean, std = d.x_train.mean(0), d.x_train.std(0) + 0.1
    h = np.maximum((d.x_test - mean) / std @ p["w1"] + p["b1"], 0)
    return float(np.mean(np.argmax(h @ p["w2"] + p["b2"], 1) == d.y_test))


def test_killed_ps_restarted_resumes_from_the_last_checkpoint(make_cluster, tmp_path):
    """SIGKILL of the only PS of async training: both workers report UnavailableError naming
    the PS task and recreate their sessions; once the PS is restarted on the same port the
    chief restores the newest checkpoint (global step continues from it: only the steps since it
    are lost), both reach the last step, and every checkpoint on disk restores with finite
    values, the last one to >= 0.97 test accuracy."""
    last = 300
    ckpt = tmp_path / "ckpt"
    c = make_cluster(MLP, [str(ckpt), str(last)], num_workers=2)

    def saved() -> int:
        path = hb.train.latest_checkpoint(str(ckpt))
        return int(path.rsplit("-", 1)[1]) if path else 0

    c.wait_for(lambda: saved() >= 100, "the checkpoint of step 100", 60)
    c.kill("ps0")
    seen = max(c.steps("worker0") + c.steps("worker1"))
    for w in ("worker0", "worker1"):
        report = r"MonitoredTrainingSession \((non-)?chief\): UnavailableError: (.*?); recreat"
        c.wait_for(lambda w=w, r=report: re.search(r, c.log(w), re.S), f"{w} to report", 15)
        why = re.search(report, c.log(w), re.S).group(2)
        assert "/job:ps/replica:0/task:0" in why, why
    at_kill = saved()  # read once the chief has failed: a save under way then has finished
    assert seen - at_kill <= 50 + 2  # what the restart may lose: steps since the checkpoint
    assert c.procs["worker0"].poll() is None and c.procs["worker1"].poll() is None
    c.start("ps", 0)
    for w in ("worker0", "worker1"):
        assert c.finish(w, 60, " of the PS restart") == 0, c.logs()
        done = re.search(r"^done (\d+) recoveries (\d+)$", c.log(w), re.M)
        assert done is not None and int(done.group(1)) >= last, c.logs()
        assert int(done.group(2)) >= 1, c.logs()
    chief = c.log("worker0")
    restored = f"restored {ckpt / f'model.ckpt-{at_kill}'}"
    assert restored in chief, c.logs()
    # continued from the checkpoint: the first global step either worker reads after its
    # recovery is just past it (the other worker may run a few steps before the chief's first)
    firsts = []
    for w, since in (("worker0", restored), ("worker1", "recreating the session")):
        tail = c.log(w).rsplit(since, 1)[1]
        firsts.append(int(re.search(r"^step (\d+)$", tail, re.M).group(1)))
    assert at_kill <= min(firsts) <= at_kill + 3, (at_kill, firsts)
    state = hb.train.get_checkpoint_state(str(ckpt))
    assert int(state.model_checkpoint_path.rsplit("-", 1)[1]) >= last
    for path in state.all_model_checkpoint_paths:
        assert _accuracy(path) > 0.5, path  # whole and finite
    assert _accuracy(state.model_checkpoint_path) >= 0.97


def test_ps_that_stays_down_fails_the_workers_after_the_recovery_timeout(make_cluster):
    """SIGKILL of the only PS, never restarted: each worker logs the UnavailableError, tries to
    recreate its session for the 3 s recovery timeout, then fails with UnavailableError naming
    the PS task (exit status 3) well within 15 s instead of hanging."""
    c = make_cluster(SYNC, ["1000000", "2", "2", "20000", "-", "3"], num_workers=2)
    c.wait_for(lambda: max(c.steps("worker1"), default=0) >= 3, "global step 3", 20)
    c.kill("ps0")
    t0 = time.monotonic()
    for w in ("worker0", "worker1"):
        rc = c.finish(w, 15 - (time.monotonic() - t0), " of the PS kill")
        assert rc == 3, c.logs()
        assert "recreating the session" in c.log(w), c.logs()
        err = re.search(r"^FATAL (\w+): (.*)$", c.log(w), re.M)
        assert err is not None, c.logs()
        assert err.group(1) == "UnavailableError", c.logs()
        assert "/job:ps/replica:0/task:0" in err.group(2), c.logs()
    assert time.monotonic() - t0 >= 2.5  # it did wait for the PS to come back


def test_device_filters_let_a_worker_start_while_another_is_down():
    """With TF1's device_filters ["/job:ps", "/job:worker/task:0"] a worker's session contacts
    only the PS and itself, so it runs while worker 1 is down; without filters the session
    fails with UnavailableError naming worker 1."""
    ports = free_ports(3)
    spec = {"ps": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{p}" for p in ports[1:]]}
    ps = hb.train.Server(spec, "ps", 0)
    worker = hb.train.Server(spec, "worker", 0)
    try:
        with hb.Graph().as_default():
            with hb.device("/job:ps/task:0"):
                v = hb.Variable(3.0, name="v")
            with hb.device("/job:worker/task:0"):
                doubled = v * 2.0
            config = hb.ConfigProto(device_filters=["/job:ps", "/job:worker/task:0"])
            with hb.Session(worker.target, config=config) as sess:
                sess.run(v.initializer)
                assert sess.run(doubled) == 6.0
            with pytest.raises(hb.errors.UnavailableError, match="/job:worker/replica:0/task:1"):
                hb.Session(worker.target)
            with pytest.raises(hb.errors.InvalidArgumentError, match="names no job"):
                hb.Session(worker.target, config=hb.ConfigProto(device_filters=["/cpu:0"]))
    finally:
        worker.stop()
        ps.stop()


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
    files are never listed, and the restarted chief resumes from the newest file on disk (even
    one the kill kept out of the index)."""
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
        on_disk = [
            int(f.rsplit("-", 1)[1])
            for f in os.listdir(ckpt)
            if f.startswith("model") and not f.endswith(".meta")
        ]
        assert n <= max(on_disk) <= n + 1
        assert _restore(str(ckpt / f"model.ckpt-{max(on_disk)}"))[0] == max(on_disk)
        previous = max(on_disk)  # the restarted chief adopts the newest file that verifies


def test_cleanup_and_shutdown_end_steps_blocked_on_a_queue():
    """A task's step blocked in a dequeue ends with AbortedError naming the reason when the
    master cleans the step up (CleanupStep) or when the task shuts down, instead of holding a
    server thread forever (the process could not exit)."""
    import threading

    server = hb.train.Server.create_local_server()
    try:
        with hb.Graph().as_default():
            q = hb.FIFOQueue(-1, hb.float32, shapes=(), shared_name="q")
            with hb.Session(server.target) as sess:
                (part,) = sess._plan([q.dequeue()], []).parts
                got = {}

                def run(step_id: int) -> None:
                    try:
                        server.worker.run_graph(part.handle, step_id, {}, 0.0)
                    except hb.errors.OpError as e:
                        got[step_id] = e

                stops = {
                    101: lambda: server.worker.cleanup_step(101, "the master went away"),
                    102: server.worker.close,
                }
                for step_id, stop in stops.items():
                    t = threading.Thread(target=run, args=(step_id,))
                    t.start()
                    time.sleep(0.2)
                    assert t.is_alive()  # waiting for an element
                    stop()
                    t.join(5)
                    assert not t.is_alive()
    finally:
        server.stop()
    assert [type(got[k]).__name__ for k in (101, 102)] == ["AbortedError", "AbortedError"]
    assert "the master went away" in str(got[101])
    assert "is shutting down" in str(got[102])
