"""``hetbed cluster`` (real processes on loopback), ``cluster_from_env`` and
``MonitoredTrainingSession``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hetbed as hb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TRAIN = textwrap.dedent(
    """
    import sys

    import numpy as np

    import hetbed as hb
    from hetbed.scenarios import datasets

    ckpt_dir, last_step = sys.argv[1], int(sys.argv[2])
    cluster, job, index = hb.train.cluster_from_env()
    server = hb.train.Server(cluster, job, index)
    if job == "ps":
        server.join()
        sys.exit(0)
    data = datasets.digits()
    g = hb.Graph()
    g.seed = 1
    setter = hb.train.replica_device_setter(
        cluster=cluster, worker_device=f"/job:worker/task:{index}"
    )
    with g.as_default():
        with hb.device(setter):
            step = hb.train.get_or_create_global_step()
            x = hb.placeholder(hb.float32, [None, 64], name="x")
            y = hb.placeholder(hb.int32, [None], name="y")
            w1 = hb.Variable(hb.random_normal([64, 128], stddev=0.1), name="w1")
            b1 = hb.Variable(hb.zeros([128]), name="b1")
            w2 = hb.Variable(hb.random_normal([128, 10], stddev=0.1), name="w2")
            b2 = hb.Variable(hb.zeros([10]), name="b2")
            logits = hb.matmul(hb.nn.relu(hb.matmul(x, w1) + b1), w2) + b2
            xent = hb.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            train = hb.train.AdamOptimizer(0.005).minimize(hb.reduce_mean(xent), global_step=step)
            hit = hb.equal(hb.cast(hb.argmax(logits, 1), hb.int32), y)
            acc = hb.reduce_mean(hb.cast(hit, hb.float32))
        rng = np.random.default_rng(index)
        with hb.train.MonitoredTrainingSession(
            master=server.target,
            is_chief=(index == 0),
            checkpoint_dir=ckpt_dir,
            save_checkpoint_steps=200,
            hooks=[hb.train.StopAtStepHook(last_step=last_step)],
        ) as sess:
            while not sess.should_stop():
                for xb, yb in datasets.batches(data.x_train, data.y_train, 64, rng):
                    sess.run(train, {x: xb, y: yb})
                    if sess.should_stop():
                        break
            if index == 0:
                print(f"test accuracy {sess.run(acc, {x: data.x_test, y: data.y_test}):.4f}")
    server.stop()
    """
)

FAIL = textwrap.dedent(
    """
    import sys

    import hetbed as hb

    cluster, job, index = hb.train.cluster_from_env()
    server = hb.train.Server(cluster, job, index)
    print(f"pid {__import__('os').getpid()}", flush=True)
    if job == "ps":
        server.join()
    elif index == 1:
        sys.exit(1)
    """
)


def _command(tmp_path, script: str, *args: str, ps: int = 1, workers: int = 2) -> list[str]:
    path = tmp_path / "task.py"
    path.write_text(script)
    cmd = [sys.executable, "-m", "hetbed.cli", "cluster", "--ps", str(ps), "--workers"]
    return cmd + [str(workers), "--grace", "2", "--", sys.executable, str(path), *args]


def _cluster(
    tmp_path, script: str, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run the launcher; on timeout SIGTERM it (it then stops its children) and fail."""
    cmd = _command(tmp_path, script, *args)
    p = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.terminate()
        out, err = p.communicate(timeout=30)
        pytest.fail(f"hetbed cluster ran over {timeout} s:\n{out}\n{err}")
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is not running
        return f.read().split(")")[-1].split()[0] != "Z"


def test_cluster_trains_digits_asynchronously(tmp_path):
    """1 PS + 2 async workers reach >= 0.97 test accuracy on digits in 1200 global steps (Adam, lr 0.005)."""
    ckpt = tmp_path / "ckpt"
    r = _cluster(tmp_path, TRAIN, str(ckpt), "1200")
    assert r.returncode == 0, r.stdout + r.stderr
    acc = re.search(r"^\[worker:0\] test accuracy ([0-9.]+)$", r.stdout, re.M)
    assert acc is not None, r.stdout + r.stderr
    assert float(acc.group(1)) >= 0.97
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln]
    assert all(re.match(r"^\[(ps:0|worker:[01])\] ", ln) for ln in lines), lines
    latest = hb.train.latest_checkpoint(str(ckpt))
    assert latest is not None and int(latest.rsplit("-", 1)[1]) >= 1200


def test_failing_worker_fails_the_cluster_and_stops_the_ps(tmp_path):
    """A worker exiting 1 makes the launcher exit 1, name it, and stop the PS process."""
    r = _cluster(tmp_path, FAIL)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "worker:1 exited with status 1" in r.stderr
    assert "worker:0 exited" not in r.stderr
    pids = {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"^\[(\w+:\d)\] pid (\d+)$", r.stdout, re.M)
    }
    assert set(pids) == {"ps:0", "worker:0", "worker:1"}
    assert not _alive(pids["ps:0"])


SLEEP = textwrap.dedent(
    """
    import os
    import time

    print(f"pid {os.getpid()}", flush=True)
    time.sleep(120)
    """
)


def test_interrupt_stops_every_task(tmp_path):
    """Ctrl-C (SIGINT) to the launcher stops all its PS and worker processes; it exits 1."""
    cmd = _command(tmp_path, SLEEP)
    p = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    pids = []
    try:
        while len(pids) < 3:
            line = p.stdout.readline()
            assert line, p.stderr.read()
            pids.append(int(line.rsplit(" ", 1)[1]))
        p.send_signal(signal.SIGINT)
        assert p.wait(timeout=30) == 1
    finally:
        if p.poll() is None:
            p.terminate()
            p.wait(timeout=30)
        for pid in pids:  # only if the launcher failed to: our own children, by pid
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert not any(_alive(pid) for pid in pids)


def test_cli_without_command_is_bad_input():
    """`hetbed cluster` with no command after -- exits 2 with a message."""
    from hetbed.cli import main

    assert main(["cluster", "--ps", "1", "--workers", "1", "--"]) == 2


def _config(**kw) -> dict:
    cfg = {
        "cluster": {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]},
        "task": {"type": "worker", "index": 0},
    }
    cfg.update(kw)
    return {"HETBED_CONFIG": json.dumps(cfg)}


def test_cluster_from_env_reads_and_rejects_configs():
    """cluster_from_env returns (spec, job, index) and says what is wrong with a bad config."""
    spec, job, index = hb.train.cluster_from_env(_config())
    assert spec == hb.train.ClusterSpec({"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]})
    assert (job, index) == ("worker", 0)
    with pytest.raises(ValueError, match="HETBED_CONFIG is not set"):
        hb.train.cluster_from_env({})
    with pytest.raises(ValueError, match="not valid JSON"):
        hb.train.cluster_from_env({"HETBED_CONFIG": "{nope"})
    with pytest.raises(ValueError, match="needs a 'cluster' object"):
        hb.train.cluster_from_env({"HETBED_CONFIG": "[]"})
    with pytest.raises(ValueError, match="needs a 'task' object"):
        hb.train.cluster_from_env(_config(task={"type": "ps"}))
    with pytest.raises(ValueError, match="task type 'chief' is not a job"):
        hb.train.cluster_from_env(_config(task={"type": "chief", "index": 0}))
    with pytest.raises(ValueError, match="has tasks \\[0\\], not task 3"):
        hb.train.cluster_from_env(_config(task={"type": "worker", "index": 3}))
    with pytest.raises(ValueError, match="bad address"):
        hb.train.cluster_from_env(_config(cluster={"ps": ["nohost"]}))


def _regression():
    step = hb.train.get_or_create_global_step()
    w = hb.Variable(np.zeros((2, 1), np.float32), name="w")
    x = hb.constant(np.array([[1.0, 2.0], [3.0, -1.0]], np.float32))
    t = hb.constant(np.array([[5.0], [1.0]], np.float32))
    loss = hb.reduce_mean(hb.square(hb.matmul(x, w) - t))
    train = hb.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=step)
    return step, w, train


def test_monitored_session_restores_and_continues_the_global_step(tmp_path):
    """A second local run restores the chief's checkpoint: global step and weights continue."""
    ckpt = str(tmp_path)
    with hb.Graph().as_default():
        step, w, train = _regression()
        hook = hb.train.StopAtStepHook(last_step=7)
        with hb.train.MonitoredTrainingSession(
            "", checkpoint_dir=ckpt, save_checkpoint_steps=3, hooks=[hook]
        ) as s:
            runs = 0
            while not s.should_stop():
                s.run(train)
                runs += 1
            w_first = s.run(w)
    assert runs == 7
    assert hb.train.latest_checkpoint(ckpt).endswith("model.ckpt-7")
    assert sorted(f for f in os.listdir(ckpt) if f.startswith("model")) == [
        "model.ckpt-3",
        "model.ckpt-6",
        "model.ckpt-7",
    ]
    with hb.Graph().as_default():
        step, w, train = _regression()
        with hb.train.MonitoredTrainingSession(
            "", checkpoint_dir=ckpt, hooks=[hb.train.StopAtStepHook(num_steps=2)]
        ) as s:
            assert s.run(step) == 7
            np.testing.assert_array_equal(s.run(w), w_first)
            while not s.should_stop():
                s.run(train)
            assert s.run(step) == 9
    assert hb.train.latest_checkpoint(ckpt).endswith("model.ckpt-9")


def test_non_chief_times_out_with_the_uninitialized_variables():
    """A non-chief whose variables nobody initializes raises DeadlineExceededError naming them."""
    with hb.Graph().as_default():
        _regression()
        with pytest.raises(hb.errors.DeadlineExceededError, match="uninitialized.*global_step, w"):
            hb.train.MonitoredTrainingSession("", is_chief=False, init_timeout_s=0.2)


def test_stop_at_step_hook_needs_one_bound():
    """StopAtStepHook takes exactly one of num_steps and last_step."""
    with pytest.raises(ValueError, match="exactly one of num_steps and last_step"):
        hb.train.StopAtStepHook()
    with pytest.raises(ValueError, match="exactly one"):
        hb.train.StopAtStepHook(num_steps=1, last_step=2)


def test_restarted_chief_still_honours_max_to_keep(tmp_path):
    """After restarts, checkpoints written before them still count toward max_to_keep (5):
    nine saves over three runs leave the newest five."""
    ckpt = str(tmp_path / "ckpt")
    for _ in range(3):
        with hb.Graph().as_default():
            inc = hb.assign_add(hb.train.get_or_create_global_step(), 1)
            with hb.train.MonitoredTrainingSession(
                master="", is_chief=True, checkpoint_dir=ckpt, save_checkpoint_steps=1
            ) as sess:
                for _ in range(3):
                    sess.run(inc)
    steps = sorted(
        int(f.split("-")[1]) for f in os.listdir(ckpt) if re.fullmatch(r"model\.ckpt-\d+", f)
    )
    assert steps == [5, 6, 7, 8, 9]
