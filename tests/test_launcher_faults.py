"""``hetbed cluster``: token hygiene, restart policy, fail-fast on a dead task, deadline
(issue 15, items 1 and 3). Real processes, each test time-capped."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import time

import pytest

# Each task prints what it was given, then behaves as its job's line of BEHAVE says.
TASK = textwrap.dedent(
    """
    import json, os, signal, sys, time

    cfg = json.loads(os.environ["HETBED_CONFIG"])
    job, index = cfg["task"]["type"], cfg["task"]["index"]
    token = os.environ.get("HETBED_CLUSTER_TOKEN")
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        parent = f.read()
    print(f"token {token} config {cfg['token'] == token} argv {token is not None and token.encode() in parent + str(sys.argv).encode()}", flush=True)
    print(f"{job}:{index} restarted {os.environ.get('HETBED_RESTARTED')}", flush=True)
    mode, arg = sys.argv[1], float(sys.argv[2])
    marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"ran-{job}-{index}")
    first = not os.path.exists(marker)
    open(marker, "a").close()
    if job == "ps" or mode == "sleep":
        time.sleep(120)
    elif mode == "fail-once" and first:
        sys.exit(3)
    elif mode == "kill" and index == 1:
        time.sleep(arg)
        os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "kill":
        time.sleep(120)
    """
)


def _run(tmp_path, *flags, mode="ok", arg=0.0, timeout=60, env=None):
    script = tmp_path / "task.py"
    script.write_text(TASK)
    cmd = [sys.executable, "-m", "hetbed.cli", "cluster", "--ps", "1", "--workers", "2"]
    cmd += ["--grace", "1", *flags, "--", sys.executable, str(script), mode, str(arg)]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=tmp_path, env=env)
    return r, time.monotonic() - t0


def _tokens(out: str) -> list[str]:
    return [ln.split()[2] for ln in out.splitlines() if " token " in ln]


def test_a_random_token_reaches_every_task_through_the_environment_only(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HETBED_CLUSTER_TOKEN"}
    r, _ = _run(tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    toks = _tokens(r.stdout)
    assert len(toks) == 3 and len(set(toks)) == 1 and len(toks[0]) == 64, r.stdout
    assert r.stdout.count("config True argv False") == 3, r.stdout
    r2, _ = _run(tmp_path, env=env)
    assert set(_tokens(r2.stdout)) != set(toks)  # fresh per cluster
    r3, _ = _run(tmp_path, "--no-token", env=env)
    assert set(_tokens(r3.stdout)) == {"None"}


def test_token_on_the_command_line_is_refused_and_token_files_must_be_private(tmp_path):
    r, _ = _run(tmp_path, "--token", "s3cret")
    assert r.returncode == 2 and "process list" in r.stderr and "--token-file" in r.stderr
    f = tmp_path / "tok"
    f.write_text("from-file-token\n")
    f.chmod(0o644)
    r, _ = _run(tmp_path, "--token-file", str(f))
    assert r.returncode == 2 and "chmod 600" in r.stderr, r.stderr
    f.chmod(0o600)
    r, _ = _run(tmp_path, "--token-file", str(f))
    assert r.returncode == 0, r.stderr
    assert set(_tokens(r.stdout)) == {"from-file-token"}


def test_failed_task_is_restarted_and_named(tmp_path):
    r, _ = _run(tmp_path, "--restart", "2", mode="fail-once")
    assert r.returncode == 0, r.stderr
    for w in (0, 1):
        assert f"worker:{w} exited with status 3; restarting it (1 of 2)" in r.stderr
        # the restarted process is told it is one (its chief then names what it restored)
        assert f"worker:{w} restarted None" in r.stdout and f"worker:{w} restarted 1" in r.stdout
    assert "ps:0 restarted None" in r.stdout and "ps:0 restarted 1" not in r.stdout


@pytest.mark.parametrize("seed", [1, 2])
def test_killed_worker_stops_the_cluster_at_once_naming_it(tmp_path, seed):
    """kill -9 of a worker at a seeded moment: without restarts the launcher stops the PS and
    the other worker (both would wait 120 s) within seconds, naming the task and the signal."""
    delay = random.Random(seed).uniform(0.0, 1.5)
    r, took = _run(tmp_path, mode="kill", arg=delay)
    assert r.returncode == 1
    assert "worker:1 was killed by signal 9 (SIGKILL); stopping the cluster" in r.stderr
    assert took < 30


def test_deadline_stops_a_stuck_cluster(tmp_path):
    r, took = _run(tmp_path, "--deadline", "2", mode="sleep")
    assert r.returncode == 1
    assert "deadline of 2 s passed with workers still running (worker:0, worker:1)" in r.stderr
    assert took < 30
    r, _ = _run(tmp_path, "--deadline", "0", mode="sleep")
    assert r.returncode == 2 and "--deadline > 0" in r.stderr
