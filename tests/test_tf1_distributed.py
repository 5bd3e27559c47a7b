"""A TF1 distributed training program (``examples/mnist_replica_tf1.py``, after TensorFlow's
mnist_replica.py) runs on hetbed with only its import line changed, under ``hetbed cluster``."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import hetbed as hb
import hetbed.compat.v1 as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "mnist_replica_tf1.py")


def test_example_differs_from_tensorflow_only_in_its_import():
    """The example's only hetbed-specific code is `import hetbed.compat.v1 as tf`: no other
    import of hetbed, no HETBED_* environment variable (it reads TF_CONFIG, as TF programs do)."""
    with open(EXAMPLE) as f:
        source = f.read()
    tree = ast.parse(source)
    imports = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imports += [(a.name, a.asname) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            imports += [(f"{node.module}.{a.name}", a.asname) for a in node.names]
    assert [i for i in imports if "hetbed" in i[0]] == [("hetbed.compat.v1", "tf")]
    doc = ast.get_docstring(tree, clean=False)
    code_strings = [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value != doc
    ]
    assert "TF_CONFIG" in code_strings
    assert not [s for s in code_strings if "HETBED" in s]


def test_mnist_replica_trains_synchronously_with_a_backup_worker(tmp_path):
    """1 PS + 3 workers, SyncReplicasOptimizer(2 of 3): the chief reaches global step 300 (its
    checkpoint too) with >= 0.97 test accuracy; every variable lives on the PS; each update
    averages 2 gradients, so the workers run at least 600 local steps in all."""
    train_dir = tmp_path / "train"
    cmd = [sys.executable, "-m", "hetbed.cli", "cluster", "--ps", "1", "--workers", "3"]
    cmd += ["--", sys.executable, EXAMPLE, "--sync_replicas", "--replicas_to_aggregate", "2"]
    cmd += ["--train_steps", "300", "--train_dir", str(train_dir)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=150, cwd=tmp_path)
    except subprocess.TimeoutExpired as e:  # the launcher stops its tasks when killed by SIGTERM
        pytest.fail(f"the cluster ran over 150 s:\n{e.stdout}\n{e.stderr}")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    step = re.search(r"^\[worker:0\] worker 0: global step (\d+)$", r.stdout, re.M)
    acc = re.search(r"^\[worker:0\] worker 0: test accuracy ([0-9.]+)$", r.stdout, re.M)
    assert step is not None and acc is not None, out
    assert int(step.group(1)) == 300
    assert float(acc.group(1)) >= 0.97, out
    assert hb.train.latest_checkpoint(str(train_dir)).endswith("model.ckpt-300")
    devices = dict(re.findall(r"^\[worker:0\] variable (\S+) on (\S+)$", r.stdout, re.M))
    assert {"global_step", "hid_w", "hid_b", "sm_w", "sm_b"} <= set(devices), out
    assert set(devices.values()) == {"/job:ps/task:0/device:cpu:0"}, devices
    runs = re.findall(r"^\[worker:(\d)\] worker \d: (\d+) local steps in", r.stdout, re.M)
    assert sorted(w for w, _ in runs) == ["0", "1", "2"], out
    assert all(int(n) > 0 for _, n in runs)
    assert sum(int(n) for _, n in runs) >= 2 * 300


def test_clip_by_value_values_and_gradient():
    """tf.clip_by_value clips to [min, max]; its gradient is 1 inside the bounds, 0 outside."""
    with tf.Graph().as_default():
        x = tf.constant(np.array([-2.0, 0.5, 3.0], np.float32))
        y = tf.clip_by_value(x, -1.0, 1.0)
        (g,) = tf.gradients(tf.reduce_sum(y), [x])
        with tf.Session() as sess:
            y_v, g_v = sess.run([y, g])
    np.testing.assert_array_equal(y_v, [-1.0, 0.5, 1.0])
    np.testing.assert_array_equal(g_v, [0.0, 1.0, 0.0])


def test_app_flags_parse_like_tf1():
    """tf.app.flags: typed values from --name=value / --name value / --[no]bool, defaults kept,
    unknown arguments left for main; a bad value or a duplicate definition is an error."""
    fv = tf.flags.FlagValues()
    tf.app.flags.DEFINE_string("job_name", "", "ps or worker", flag_values=fv)
    tf.app.flags.DEFINE_integer("task_index", None, "index", flag_values=fv)
    tf.app.flags.DEFINE_float("learning_rate", 0.01, "rate", flag_values=fv)
    tf.app.flags.DEFINE_boolean("sync_replicas", False, "sync", flag_values=fv)
    tf.app.flags.DEFINE_boolean("verbose", True, "talk", flag_values=fv)
    tf.app.flags.DEFINE_list("hosts", "a:1,b:2", "hosts", flag_values=fv)
    argv = ["prog", "--job_name=worker", "--task_index", "2", "--sync_replicas", "--noverbose"]
    rest = fv(argv + ["--other=1", "file.txt"])
    assert rest == ["prog", "--other=1", "file.txt"]
    assert (fv.job_name, fv.task_index, fv.learning_rate) == ("worker", 2, 0.01)
    assert fv.sync_replicas is True and fv.verbose is False
    assert fv.hosts == ["a:1", "b:2"]
    with pytest.raises(tf.flags.Error, match="--task_index: bad integer value 'two'"):
        fv(["prog", "--task_index=two"])
    with pytest.raises(tf.flags.Error, match="--job_name is defined twice"):
        tf.app.flags.DEFINE_string("job_name", "", "again", flag_values=fv)
    with pytest.raises(AttributeError, match="unknown flag --nope"):
        fv.nope  # noqa: B018
