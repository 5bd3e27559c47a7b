"""``hetbed cluster`` with workers that see stand-in GPUs (tests/fakecupy on PYTHONPATH, no hook in
hetbed): each worker places two towers on its own gpu:0 and gpu:1, without soft placement, and
trains its parameters on the PS; the result equals the same steps computed with numpy."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from gpu_fixtures import fake_env

SCRIPT = textwrap.dedent(
    """
    import json
    import sys
    import time

    import numpy as np

    import hetbed as hb

    cluster, job, index = hb.train.cluster_from_env()
    server = hb.train.Server(cluster, job, index)
    if job == "ps":
        server.join()
        sys.exit(0)
    rng = np.random.default_rng(index)
    w0 = (rng.standard_normal((8, 3)) * 0.5).astype(np.float32)
    xb = rng.standard_normal((16, 8)).astype(np.float32)
    yb = rng.standard_normal((16, 3)).astype(np.float32)
    with hb.Graph().as_default():
        with hb.device("/job:ps/task:0"):
            w = hb.Variable(w0, name=f"w{index}")
        x = hb.placeholder(hb.float32, [16, 8])
        y = hb.placeholder(hb.float32, [16, 3])
        xs, ys = hb.split(x, 2), hb.split(y, 2)
        grads = []
        for k in range(2):
            with hb.device(f"/job:worker/task:{index}/device:gpu:{k}"):
                loss = hb.reduce_mean(hb.square(hb.matmul(xs[k], w) - ys[k]))
                grads.append(hb.gradients(loss, [w])[0])
        with hb.device("/job:ps/task:0"):
            train = hb.assign_sub(w, hb.add_n(grads) * 0.05)
        # only the PS and this worker: the other worker may finish (and stop) first
        config = hb.ConfigProto(
            allow_soft_placement=False,
            device_filters=["/job:ps", f"/job:worker/task:{index}"],
        )
        deadline = time.monotonic() + 60
        while True:  # the PS may still be starting
            try:
                s = hb.Session(server.target, config=config)
                break
            except hb.errors.UnavailableError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        with s:
            s.run(w.initializer)
            for _ in range(3):
                s.run(train, {x: xb, y: yb})
            gpus = sorted(d.name for d in s.list_devices() if d.device_type == "gpu")
            out = {"w": s.run(w).tolist(), "gpus": gpus}
    print("RESULT " + json.dumps(out), flush=True)
    server.stop()
    """
)


def _numpy_steps(index: int) -> np.ndarray:
    rng = np.random.default_rng(index)
    w = (rng.standard_normal((8, 3)) * 0.5).astype(np.float64)
    xb = rng.standard_normal((16, 8)).astype(np.float32).astype(np.float64)
    yb = rng.standard_normal((16, 3)).astype(np.float32).astype(np.float64)
    for _ in range(3):
        g = 0.0
        for k in range(2):
            xk, yk = xb[8 * k : 8 * k + 8], yb[8 * k : 8 * k + 8]
            g = g + 2.0 / yk.size * xk.T @ (xk @ w - yk)
        w = w - 0.05 * g
    return w


def test_cluster_workers_place_towers_on_standin_gpus(tmp_path):
    script = tmp_path / "task.py"
    script.write_text(SCRIPT)
    cmd = [sys.executable, "-m", "hetbed.cli", "cluster", "--ps", "1", "--workers", "2"]
    cmd += ["--grace", "2", "--", sys.executable, str(script)]
    try:
        r = subprocess.run(
            cmd, capture_output=True, text=True, cwd=tmp_path, env=fake_env(2), timeout=120
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"hetbed cluster ran over 120 s:\n{e.stdout}\n{e.stderr}")
    assert r.returncode == 0, r.stdout + r.stderr
    results = dict(re.findall(r"^\[worker:(\d)\] RESULT (.*)$", r.stdout, re.M))
    assert sorted(results) == ["0", "1"], r.stdout
    for i, text in results.items():
        got = json.loads(text)
        assert [
            g.rsplit("/", 1)[-1] for g in got["gpus"] if f"/job:worker/replica:0/task:{i}/" in g
        ] == [
            "device:gpu:0",
            "device:gpu:1",
        ]
        np.testing.assert_allclose(got["w"], _numpy_steps(int(i)), rtol=1e-4, atol=1e-5)
