"""Distributed MNIST-style training, written as a TensorFlow 1.x program (after TensorFlow's
classic ``tensorflow/tools/dist_test/python/mnist_replica.py``), on scikit-learn's 8x8 digits.

The only line that differs from the TensorFlow program is the import of ``tf``. Run it as a
cluster of local processes::

    hetbed cluster --ps 1 --workers 3 -- python examples/mnist_replica_tf1.py \\
        --sync_replicas --replicas_to_aggregate 2 --train_steps 300

(``hetbed cluster`` gives every task its role in ``TF_CONFIG``, as TensorFlow's launchers do), or
start each task yourself with ``--ps_hosts``, ``--worker_hosts``, ``--job_name`` and
``--task_index``; flags are TF1's ``tf.app.flags``. Between-graph replication: every worker builds the same graph, whose variables
``replica_device_setter`` places on the PS tasks (round-robin). With ``--sync_replicas`` the
``SyncReplicasOptimizer`` averages ``--replicas_to_aggregate`` gradients per update out of all
the workers; more workers than that are backups. The chief (worker 0) prints the test accuracy.
"""

import json
import math
import os
import sys
import time

import numpy as np
from sklearn.datasets import load_digits

import hetbed.compat.v1 as tf  # was: import tensorflow.compat.v1 as tf

flags = tf.app.flags
flags.DEFINE_string("ps_hosts", "", "Comma-separated list of hostname:port pairs")
flags.DEFINE_string("worker_hosts", "", "Comma-separated list of hostname:port pairs")
flags.DEFINE_string("job_name", "", "job name: worker or ps (default: from TF_CONFIG)")
flags.DEFINE_integer("task_index", None, "Worker task index, should be >= 0")
flags.DEFINE_integer("hidden_units", 256, "Number of units in the hidden layer of the NN")
flags.DEFINE_integer("train_steps", 300, "Number of (global) training steps to perform")
flags.DEFINE_integer("batch_size", 64, "Training batch size")
flags.DEFINE_float("learning_rate", 0.01, "Learning rate")
flags.DEFINE_float("decay_rate", 0.05, "Fraction of the learning rate left at train_steps")
flags.DEFINE_float("weight_decay", 1e-3, "L2 penalty of the weights")
flags.DEFINE_boolean("sync_replicas", False, "Use the sync_replicas (synchronized replicas) mode")
flags.DEFINE_integer(
    "replicas_to_aggregate", None, "Number of replicas to aggregate before update (default: all)"
)
flags.DEFINE_string("train_dir", "", "Checkpoint directory of the chief (default: none)")
flags.DEFINE_integer("save_checkpoint_steps", 100, "Global steps between checkpoints")
flags.DEFINE_integer("seed", 1, "Graph-level random seed")
FLAGS = flags.FLAGS

IMAGE_PIXELS = 8
NUM_CLASSES = 10


def cluster_and_task():
    """The cluster spec, job name and task index, from the flags or else from TF_CONFIG."""
    if FLAGS.job_name:
        spec = {"ps": FLAGS.ps_hosts.split(","), "worker": FLAGS.worker_hosts.split(",")}
        return tf.train.ClusterSpec(spec), FLAGS.job_name, FLAGS.task_index
    tf_config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    if "cluster" not in tf_config or "task" not in tf_config:
        sys.exit("give --job_name/--task_index/--ps_hosts/--worker_hosts, or set TF_CONFIG")
    task = tf_config["task"]
    return tf.train.ClusterSpec(tf_config["cluster"]), task["type"], int(task["index"])


def load_data(seed=0, test_fraction=0.25):
    """The digits split by a fixed permutation into (train, test), each pixel standardized by
    the training set's mean and standard deviation."""
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    perm = np.random.RandomState(seed).permutation(len(x))
    x, y = x[perm], y[perm]
    n_test = int(round(len(x) * test_fraction))
    mean, std = x[n_test:].mean(axis=0), x[n_test:].std(axis=0) + 0.1
    x = (x - mean) / std
    return (x[n_test:], y[n_test:]), (x[:n_test], y[:n_test])


def main(unused_argv):
    cluster, job_name, task_index = cluster_and_task()
    num_workers = cluster.num_tasks("worker")

    server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
    if job_name == "ps":
        server.join()
        return 0

    is_chief = task_index == 0
    (x_train, y_train), (x_test, y_test) = load_data()
    print(
        f"worker {task_index}: {len(x_train)} training / {len(x_test)} test images, "
        f"{num_workers} workers, {cluster.num_tasks('ps')} ps",
        flush=True,
    )

    tf.set_random_seed(FLAGS.seed)
    worker_device = f"/job:worker/task:{task_index}/cpu:0"
    with tf.device(
        tf.train.replica_device_setter(
            worker_device=worker_device, ps_device="/job:ps/cpu:0", cluster=cluster
        )
    ):
        global_step = tf.train.get_or_create_global_step()

        hid_w = tf.Variable(
            tf.truncated_normal(
                [IMAGE_PIXELS * IMAGE_PIXELS, FLAGS.hidden_units], stddev=1.0 / IMAGE_PIXELS
            ),
            name="hid_w",
        )
        hid_b = tf.Variable(tf.zeros([FLAGS.hidden_units]), name="hid_b")
        sm_w = tf.Variable(
            tf.truncated_normal(
                [FLAGS.hidden_units, NUM_CLASSES], stddev=1.0 / math.sqrt(FLAGS.hidden_units)
            ),
            name="sm_w",
        )
        sm_b = tf.Variable(tf.zeros([NUM_CLASSES]), name="sm_b")

        x = tf.placeholder(tf.float32, [None, IMAGE_PIXELS * IMAGE_PIXELS], name="x")
        y_ = tf.placeholder(tf.int64, [None], name="y_")
        hid = tf.nn.relu(tf.nn.xw_plus_b(x, hid_w, hid_b))
        logits = tf.nn.xw_plus_b(hid, sm_w, sm_b)
        y = tf.nn.softmax(logits)
        cross_entropy = -tf.reduce_mean(
            tf.reduce_sum(
                tf.one_hot(y_, NUM_CLASSES) * tf.log(tf.clip_by_value(y, 1e-10, 1.0)), axis=1
            )
        )
        loss = cross_entropy + FLAGS.weight_decay * (tf.nn.l2_loss(hid_w) + tf.nn.l2_loss(sm_w))
        correct = tf.equal(tf.argmax(y, 1), y_)
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))

        learning_rate = tf.train.exponential_decay(
            FLAGS.learning_rate, global_step, FLAGS.train_steps, FLAGS.decay_rate
        )
        opt = tf.train.AdamOptimizer(learning_rate)
        if FLAGS.sync_replicas:
            replicas_to_aggregate = FLAGS.replicas_to_aggregate or num_workers
            opt = tf.train.SyncReplicasOptimizer(
                opt,
                replicas_to_aggregate=replicas_to_aggregate,
                total_num_replicas=num_workers,
                name="mnist_sync_replicas",
            )
        train_step = opt.minimize(loss, global_step=global_step)

    if job_name == "worker" and is_chief:
        for v in tf.global_variables():
            print(f"variable {v.op.name} on {v.device}", flush=True)

    hooks = [tf.train.StopAtStepHook(last_step=FLAGS.train_steps)]
    if FLAGS.sync_replicas:
        hooks.append(opt.make_session_run_hook(is_chief))
    sess_config = tf.ConfigProto(allow_soft_placement=True, log_device_placement=False)

    rng = np.random.RandomState(FLAGS.seed + task_index)
    local_step = 0
    t0 = time.time()
    with tf.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=is_chief,
        checkpoint_dir=FLAGS.train_dir or None,
        save_checkpoint_steps=FLAGS.save_checkpoint_steps,
        hooks=hooks,
        config=sess_config,
    ) as sess:
        print(f"worker {task_index}: session ready", flush=True)
        while not sess.should_stop():
            idx = rng.randint(0, len(x_train), FLAGS.batch_size)
            _, step = sess.run([train_step, global_step], {x: x_train[idx], y_: y_train[idx]})
            local_step += 1
            if local_step % 100 == 0:
                print(f"worker {task_index}: local step {local_step}, global step {step}")
        if is_chief:
            acc, step = sess.run([accuracy, global_step], {x: x_test, y_: y_test})
            print(f"worker {task_index}: global step {step}", flush=True)
            print(f"worker {task_index}: test accuracy {acc:.4f}", flush=True)
    print(f"worker {task_index}: {local_step} local steps in {time.time() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    tf.app.run()
