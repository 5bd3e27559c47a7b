"""WP4 training extras: Adadelta / FTRL / proximal GD against numpy formulas (dense and sparse),
tf.metrics against numpy, and LoggingTensorHook / NanTensorHook / FeedFnHook."""

from __future__ import annotations

import logging
import os

import numpy as np
import pytest

import hetbed as hb
import hetbed.compat.v1 as tf

# ---- optimizers ------------------------------------------------------------------------------

LR = 0.1


def np_adadelta(w, g, st):
    rho, eps = 0.9, 1e-6
    st["a"] = rho * st["a"] + (1 - rho) * g * g
    upd = np.sqrt(st["u"] + eps) / np.sqrt(st["a"] + eps) * g
    st["u"] = rho * st["u"] + (1 - rho) * upd * upd
    return w - LR * upd


def np_ftrl(w, g, st, l1=0.01, l2=0.02, shrink=0.03, p=-0.5):
    gs = g + 2 * shrink * w
    n_new = st["n"] + g * g
    sigma = (n_new ** (-p) - st["n"] ** (-p)) / LR
    st["z"] = st["z"] + gs - sigma * w
    st["n"] = n_new
    quad = n_new ** (-p) / LR + 2 * l2
    return np.where(np.abs(st["z"]) > l1, (np.sign(st["z"]) * l1 - st["z"]) / quad, 0.0)


def np_prox(w, g, st, l1=0.05, l2=0.1):
    prox = w - LR * g
    return np.sign(prox) * np.maximum(np.abs(prox) - LR * l1, 0) / (1 + LR * l2)


OPTS = {
    "adadelta": (lambda: tf.train.AdadeltaOptimizer(LR, rho=0.9, epsilon=1e-6), np_adadelta),
    "ftrl": (
        lambda: tf.train.FtrlOptimizer(
            LR,
            initial_accumulator_value=0.1,
            l1_regularization_strength=0.01,
            l2_regularization_strength=0.02,
            l2_shrinkage_regularization_strength=0.03,
        ),
        np_ftrl,
    ),
    "prox": (
        lambda: tf.train.ProximalGradientDescentOptimizer(
            LR, l1_regularization_strength=0.05, l2_regularization_strength=0.1
        ),
        np_prox,
    ),
}
W0 = np.array([[0.5, -1.0], [2.0, 0.1], [-0.3, 0.7]])
X = np.array([[1.0, 2.0], [-1.0, 0.5], [0.3, -2.0]])


@pytest.mark.parametrize("name", sorted(OPTS))
def test_optimizer_matches_numpy_dense_and_sparse(name):
    make, rule = OPTS[name]
    g = hb.Graph()
    with g.as_default():
        w = hb.Variable(W0, name="w")
        e = hb.Variable(W0, name="e")  # used through gather: a sparse gradient
        idx = hb.constant([2, 0, 2], hb.int32)  # row 2 twice, row 1 untouched
        loss = hb.reduce_sum(w * w * X) + hb.reduce_sum(hb.gather(e, idx) ** 2)
        opt = make()
        step = opt.minimize(loss)
        with hb.Session(graph=g) as s:
            s.run(hb.global_variables_initializer())
            for _ in range(3):
                s.run(step)
            got_w, got_e = s.run([w, e])
    stw = {"a": 0.0, "u": 0.0, "n": 0.1, "z": 0.0}
    ste = {k: np.full_like(W0, v) for k, v in stw.items()}
    stw = {k: np.full_like(W0, v) for k, v in stw.items()}
    ww, ee = W0.copy(), W0.copy()
    for _ in range(3):
        ww = rule(ww, 2 * ww * X, stw)
        ge = np.zeros_like(ee)
        ge[[0, 2]] = [2 * ee[0], 4 * ee[2]]
        rows = [0, 2]
        sub = {k: v[rows] for k, v in ste.items()}
        new_rows = rule(ee[rows], ge[rows], sub)
        for k in ste:
            ste[k][rows] = sub[k]
        ee = ee.copy()
        ee[rows] = new_rows
    np.testing.assert_allclose(got_w, ww, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(got_e, ee, rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(got_e[1], W0[1])  # a row without gradient is unchanged


def test_optimizer_arguments_checked():
    with pytest.raises(ValueError, match="learning_rate_power"):
        tf.train.FtrlOptimizer(0.1, learning_rate_power=0.5)
    with pytest.raises(ValueError, match="l1_regularization_strength"):
        tf.train.FtrlOptimizer(0.1, l1_regularization_strength=-1.0)


# ---- metrics ---------------------------------------------------------------------------------


def test_metrics_accumulate_over_batches():
    labels = [np.array([1, 0, 1, 1]), np.array([0, 0, 1, 0])]
    preds = [np.array([1, 1, 0, 1]), np.array([0, 1, 1, 1])]
    vals = [np.array([1.0, 2.0, 3.0]), np.array([5.0, 7.0, 9.0])]
    wts = [np.array([1.0, 0.0, 2.0]), np.array([1.0, 1.0, 0.5])]
    g = hb.Graph()
    with g.as_default():
        lab = hb.placeholder(hb.int64, [None])
        pred = hb.placeholder(hb.int64, [None])
        v = hb.placeholder(hb.float64, [None])
        w = hb.placeholder(hb.float64, [None])
        acc, acc_up = tf.metrics.accuracy(lab, pred)
        mean, mean_up = tf.metrics.mean(v, weights=w, metrics_collections=["m"])
        prec, prec_up = tf.metrics.precision(lab, pred)
        rec, rec_up = tf.metrics.recall(lab, pred)
        mse, mse_up = tf.metrics.mean_squared_error(lab, pred)
        tp, tp_up = tf.metrics.true_positives(lab, pred)
        assert tf.get_collection("m") == [mean]
        names = sorted(x.op.name for x in tf.local_variables())
        assert "accuracy/total" in names and "accuracy/count" in names
        assert tf.trainable_variables() == []
        with hb.Session(graph=g) as s:
            s.run(tf.local_variables_initializer())
            assert s.run([acc, mean, prec, rec]) == [0.0, 0.0, 0.0, 0.0]  # nothing counted yet
            for i in range(2):
                s.run(
                    [acc_up, mean_up, prec_up, rec_up, mse_up, tp_up],
                    {lab: labels[i], pred: preds[i], v: vals[i], w: wts[i]},
                )
            got = s.run([acc, mean, prec, rec, mse, tp])
    la, pa = np.concatenate(labels), np.concatenate(preds)
    tp_n = np.sum((la == 1) & (pa == 1))
    want = [
        np.mean(la == pa),
        np.sum(np.concatenate(vals) * np.concatenate(wts)) / np.sum(np.concatenate(wts)),
        tp_n / np.sum(pa == 1),
        tp_n / np.sum(la == 1),
        np.mean((la - pa) ** 2.0),
        tp_n,
    ]
    np.testing.assert_allclose(got, want, rtol=1e-6)


# ---- hooks -----------------------------------------------------------------------------------


def test_logging_tensor_hook_every_n_iter_and_formatter(caplog):
    with hb.Graph().as_default():
        i = hb.placeholder(hb.int32, [], name="i")
        sq = hb.square(i, name="sq")
        hooks = [tf.train.LoggingTensorHook({"i": i, "sq": sq}, every_n_iter=2)]
        with caplog.at_level(logging.INFO, logger="hetbed"):
            with tf.train.MonitoredTrainingSession(hooks=hooks) as sess:
                for n in range(5):
                    sess.run(sq, {i: n})
        with pytest.raises(ValueError):
            tf.train.LoggingTensorHook([i], every_n_iter=1, every_n_secs=1.0)
    with hb.Graph().as_default(), caplog.at_level(logging.INFO, logger="hetbed"):
        v = hb.Variable(3, name="v")
        sq = hb.square(v, name="sq")
        end = lambda d: f"END {int(d['sq:0'])}"  # noqa: E731
        hook = tf.train.LoggingTensorHook(["sq:0"], at_end=True, formatter=end)
        with tf.train.MonitoredTrainingSession(hooks=[hook]) as sess:
            sess.run(v)
    lines = [r.getMessage() for r in caplog.records if r.name == "hetbed"]
    assert [ln.split(" (")[0] for ln in lines] == [
        "i = 0, sq = 0",
        "i = 2, sq = 4",
        "i = 4, sq = 16",
        "END 9",
    ]
    assert lines[1].endswith("sec)")


def test_nan_tensor_hook_and_feed_fn_hook():
    with hb.Graph().as_default():
        p = hb.placeholder(hb.float32, [])
        loss = hb.log(p)
        feeds = iter([1.0, -1.0, 2.0])
        fail = [tf.train.FeedFnHook(lambda: {p: next(feeds)}), tf.train.NanTensorHook(loss)]
        with pytest.raises(tf.train.NanLossDuringTrainingError, match="NaN loss"):
            with tf.train.MonitoredTrainingSession(hooks=fail) as sess:
                assert sess.run(loss) == 0.0
                sess.run(loss)
    with hb.Graph().as_default():
        p = hb.placeholder(hb.float32, [])
        loss = hb.log(p)
        feeds2 = iter([1.0, -1.0, 2.0])
        soft = [
            tf.train.FeedFnHook(lambda: {p: next(feeds2)}),
            tf.train.NanTensorHook(loss, fail_on_nan_loss=False),
        ]
        with tf.train.MonitoredTrainingSession(hooks=soft) as sess:
            n = 0
            while not sess.should_stop():
                sess.run(loss)
                n += 1
        assert n == 2


# ---- Supervisor and SummarySaverHook --------------------------------------------------------


def test_supervisor_initializes_saves_and_restores(tmp_path):
    logdir = str(tmp_path)
    for run in range(2):
        with hb.Graph().as_default():
            gs = tf.train.get_or_create_global_step()
            w = hb.Variable(10.0, name="w")
            step = hb.group(hb.assign_add(w, 1.0), hb.assign_add(gs, 1))
            sv = tf.train.Supervisor(logdir=logdir, summary_op=None, save_model_secs=0)
            assert sv.global_step is gs and sv.saver is not None and sv.summary_writer is None
            with sv.managed_session() as sess:
                assert sess.run(w) == 10.0 + 3 * run  # restored on the second run
                for _ in range(3):
                    if sv.should_stop():
                        break
                    sess.run(step)
                if run == 1:
                    raise hb.errors.OutOfRangeError("end of input")  # a clean stop
            assert sv.should_stop()
    assert tf.train.latest_checkpoint(logdir).endswith("model.ckpt-6")


def test_a_restarted_chief_names_the_checkpoint_it_restored(tmp_path, monkeypatch, caplog):
    """Where ``hetbed cluster`` restarted the task (HETBED_RESTARTED set), the chief's restore is
    a warning naming the checkpoint (the cluster's log shows warnings); a first start restores
    quietly."""
    for kind in ("supervisor", "monitored"):
        logdir = str(tmp_path / kind)
        for run, restarted in enumerate((None, None, "1")):
            if restarted:
                monkeypatch.setenv("HETBED_RESTARTED", restarted)
            else:
                monkeypatch.delenv("HETBED_RESTARTED", raising=False)
            caplog.clear()
            with hb.Graph().as_default(), caplog.at_level("WARNING", logger="hetbed.train"):
                gs = tf.train.get_or_create_global_step()
                inc = hb.assign_add(gs, 1)
                if kind == "supervisor":
                    sv = tf.train.Supervisor(logdir=logdir, summary_op=None, save_model_secs=0)
                    with sv.managed_session() as sess:  # (saved as it closes)
                        sess.run(inc)
                else:
                    with tf.train.MonitoredTrainingSession(
                        checkpoint_dir=logdir, save_checkpoint_steps=1, save_summaries_steps=None
                    ) as sess:
                        sess.run(inc)
            said = [r.getMessage() for r in caplog.records if "restored" in r.getMessage()]
            if run < 2:
                assert said == [], (kind, said)
            else:
                assert len(said) == 1 and said[0].endswith("-2"), (kind, said)


def test_summary_saver_hook_every_n_steps():
    pytest.importorskip("tensorboard")
    from tensorboard.compat.proto import summary_pb2  # protobuf only, no TensorFlow import

    class Writer:  # stands in for a FileWriter (whose import may pull TensorFlow in: slow)
        def __init__(self):
            self.got, self.flushed = [], False

        def add_summary(self, summary, step):
            self.got.append((step, summary_pb2.Summary.FromString(bytes(summary))))

        def flush(self):
            self.flushed = True

    with hb.Graph().as_default():
        gs = tf.train.get_or_create_global_step()
        tf.summary.scalar("seven", hb.constant(7.0))
        step = hb.assign_add(gs, 1)
        writer = Writer()
        hook = tf.train.SummarySaverHook(save_steps=2, summary_writer=writer)
        with tf.train.MonitoredTrainingSession(hooks=[hook]) as sess:
            for _ in range(5):
                sess.run(step)
    assert writer.flushed
    values = [(v.tag, v.simple_value) for _, sm in writer.got for v in sm.value]
    assert values == [("seven", 7.0)] * 3
    # the global step is read in the step that bumps it: steps 0, 2, 4 or 1, 3, 5
    steps = [st for st, _ in writer.got]
    assert steps[1] - steps[0] == 2 and steps[2] - steps[1] == 2
    with pytest.raises(ValueError, match="exactly one"):
        tf.train.SummarySaverHook(save_steps=1)


def test_monitored_training_session_takes_tf1s_arguments(tmp_path, caplog):
    """TF1's signature, in its order: a Scaffold (init op fed, init_fn after it), chief-only
    hooks, checkpoints every N steps (and at the end), summaries of the graph's summary ops to
    summary_dir, the step rate logged; both save intervals None: no checkpoint; both given:
    refused."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    ckdir, sumdir = str(tmp_path / "ck"), str(tmp_path / "sum")
    with hb.Graph().as_default():
        gs = tf.train.get_or_create_global_step()
        start = tf.placeholder(tf.float32, [])
        w = tf.Variable(start, name="w")
        tf.summary.scalar("w", w)
        step = tf.group(tf.assign_add(w, 1.0), tf.assign_add(gs, 1))
        seen = []

        class Chief(tf.train.SessionRunHook):
            def after_create_session(self, session, coord):
                seen.append(float(session.run(w)))

        double = tf.assign(w, w * 2.0)

        def init_fn(scaffold, sess):
            sess.run(double)  # after the init op: 2 x 3

        scaffold = tf.train.Scaffold(init_feed_dict={start: 3.0}, init_fn=init_fn)
        with caplog.at_level("INFO", logger="hetbed.train"):
            with tf.train.MonitoredTrainingSession(
                "", True, ckdir, scaffold, None, [Chief()],
                save_summaries_steps=2, log_step_count_steps=2,
                save_checkpoint_steps=3, summary_dir=sumdir,
            ) as sess:  # fmt: skip
                for _ in range(7):
                    sess.run(step)
                final = sess.run(w)
        assert seen == [6.0] and final == 13.0
        assert any("global_step/sec" in r.getMessage() for r in caplog.records)
    kept = tf.train.get_checkpoint_state(ckdir).all_model_checkpoint_paths
    assert [os.path.basename(p) for p in kept] == [  # TF's step-0 save first
        "model.ckpt-0",
        "model.ckpt-3",
        "model.ckpt-6",
        "model.ckpt-7",
    ]
    (events,) = [f for f in os.listdir(sumdir) if "tfevents" in f]
    steps = [
        e.step
        for e in EventFileLoader(os.path.join(sumdir, events)).Load()
        if e.HasField("summary")
    ]
    assert steps == [1, 3, 5, 7], steps  # (every 2 global steps from the first run's)
    for kw, want in (
        ({"save_checkpoint_steps": None, "save_checkpoint_secs": None}, None),
        ({"save_checkpoint_steps": 2, "save_checkpoint_secs": 5.0}, "not both"),
    ):
        d = str(tmp_path / f"ck{len(kw)}{want}")
        with hb.Graph().as_default():
            inc = tf.assign_add(tf.train.get_or_create_global_step(), 1)
            if want:
                with pytest.raises(ValueError, match=want):
                    tf.train.MonitoredTrainingSession(checkpoint_dir=d, **kw)
                continue
            with tf.train.MonitoredTrainingSession(checkpoint_dir=d, **kw) as sess:
                sess.run(inc)
        assert tf.train.latest_checkpoint(d) is None
