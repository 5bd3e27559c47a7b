"""TF1 slim's ``evaluation``: ``evaluate_once`` (restore a checkpoint, run the metrics' update
ops ``num_evals`` times, write the summaries, return the final op's value) and
``evaluation_loop`` (the same for each new checkpoint of a folder, as training writes them),
as research/slim's eval_image_classifier.py calls them.

A run: a monitored session of the default graph (``master`` is its target; "" a local one;
``hooks`` see it begin, each run and its end), the variables restored from the checkpoint
(``variables_to_restore``: all global ones by default), local variables and tables initialized,
``initial_op`` run, ``eval_op`` run ``num_evals`` times, ``final_op`` run and its value
returned. ``summary_op`` (by default every summary of the graph)
is written to ``logdir`` at the checkpoint's global step, if the graph has a global step.
"""

from __future__ import annotations

import logging
from typing import Any

import hetbed.compat.v1 as _tf

_log = logging.getLogger("hetbed")
_USE_DEFAULT = object()


def _run_once(
    saver: Any,
    master: str,
    checkpoint_path: str,
    logdir: str | None,
    num_evals: int,
    initial_op: Any,
    initial_op_feed_dict: Any,
    eval_op: Any,
    eval_op_feed_dict: Any,
    final_op: Any,
    final_op_feed_dict: Any,
    summary_op: Any,
    summary_op_feed_dict: Any,
    variables_to_restore: Any,
    session_config: Any,
    hooks: Any,
) -> Any:
    g = _tf.get_default_graph()
    if summary_op is _USE_DEFAULT:
        summary_op = _tf.summary.merge_all()
    step = _tf.train.get_global_step(g)
    scaffold = _tf.train.Scaffold(saver=saver)
    creator = _tf.train.ChiefSessionCreator(
        scaffold=scaffold,
        master=master,
        config=session_config,
        checkpoint_filename_with_path=checkpoint_path,
    )
    # a monitored session: the hooks see begin, the session, every run and the end, as TF's
    with _tf.train.MonitoredSession(session_creator=creator, hooks=list(hooks or [])) as sess:
        if initial_op is not None:
            sess.run(initial_op, initial_op_feed_dict)
        if eval_op is not None:
            for i in range(int(num_evals)):
                sess.run(eval_op, eval_op_feed_dict)
                _log.info("Evaluation [%d/%d]", i + 1, num_evals)
        out = sess.run(final_op, final_op_feed_dict) if final_op is not None else None
        if summary_op is not None and logdir:
            summary = sess.run(summary_op, summary_op_feed_dict)
            at = int(sess.run(step)) if step is not None else 0
            writer = _tf.summary.FileWriter(logdir, g)
            try:
                writer.add_summary(summary, at)
            finally:
                writer.close()
    return out


def evaluate_once(
    master: str,
    checkpoint_path: str,
    logdir: str | None,
    num_evals: int = 1,
    initial_op: Any = None,
    initial_op_feed_dict: Any = None,
    eval_op: Any = None,
    eval_op_feed_dict: Any = None,
    final_op: Any = None,
    final_op_feed_dict: Any = None,
    summary_op: Any = _USE_DEFAULT,
    summary_op_feed_dict: Any = None,
    variables_to_restore: Any = None,
    session_config: Any = None,
    hooks: Any = None,
) -> Any:
    """One evaluation of ``checkpoint_path`` (see the module); returns ``final_op``'s value."""
    if checkpoint_path is None:
        raise ValueError("evaluate_once: checkpoint_path is None (no checkpoint to evaluate)")
    return _run_once(
        _tf.train.Saver(variables_to_restore),
        master, checkpoint_path, logdir, num_evals, initial_op, initial_op_feed_dict, eval_op,
        eval_op_feed_dict, final_op, final_op_feed_dict, summary_op, summary_op_feed_dict,
        variables_to_restore, session_config, hooks,
    )  # fmt: skip


def evaluation_loop(
    master: str,
    checkpoint_dir: str,
    logdir: str | None,
    num_evals: int = 1,
    initial_op: Any = None,
    initial_op_feed_dict: Any = None,
    init_fn: Any = None,
    eval_op: Any = None,
    eval_op_feed_dict: Any = None,
    final_op: Any = None,
    final_op_feed_dict: Any = None,
    summary_op: Any = _USE_DEFAULT,
    summary_op_feed_dict: Any = None,
    variables_to_restore: Any = None,
    eval_interval_secs: float = 60,
    max_number_of_evaluations: int | None = None,
    session_config: Any = None,
    timeout: float | None = None,
    timeout_fn: Any = None,
    hooks: Any = None,
) -> Any:
    """Evaluate each new checkpoint of ``checkpoint_dir`` as it appears (waiting
    ``eval_interval_secs`` between looks), until ``max_number_of_evaluations`` or ``timeout``
    seconds with none new; returns the last evaluation's ``final_op`` value."""
    if init_fn is not None:
        raise ValueError("evaluation_loop: init_fn is not supported in hetbed")
    out, done = None, 0
    saver = _tf.train.Saver(variables_to_restore)  # (made once: the first run finalizes the graph)
    for path in _tf.train.checkpoints_iterator(
        checkpoint_dir, min_interval_secs=eval_interval_secs, timeout=timeout, timeout_fn=timeout_fn
    ):
        out = _run_once(
            saver, master, path, logdir, num_evals, initial_op, initial_op_feed_dict, eval_op,
            eval_op_feed_dict, final_op, final_op_feed_dict, summary_op, summary_op_feed_dict,
            variables_to_restore, session_config, hooks,
        )  # fmt: skip
        done += 1
        _log.info("evaluation_loop: evaluated %s (%d)", path, done)
        if max_number_of_evaluations is not None and done >= max_number_of_evaluations:
            break
    return out


__all__ = ["evaluate_once", "evaluation_loop"]
