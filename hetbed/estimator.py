"""``tf.estimator`` (TF1's): ``Estimator`` around a ``model_fn``, with ``train``, ``evaluate``
and ``predict``; ``EstimatorSpec``, ``ModeKeys``, ``RunConfig``, ``TrainSpec``/``EvalSpec`` with
``train_and_evaluate``, and ``inputs.numpy_input_fn``.

Each call builds a new graph: ``input_fn()`` (a ``Dataset``, read through a one-shot iterator,
or a ``(features, labels)`` pair of tensors), then ``model_fn(features, labels, mode, params,
config)`` (any of those arguments it declares). ``train`` runs the spec's ``train_op`` in a
``MonitoredTrainingSession`` on ``model_dir`` (so it resumes from the latest checkpoint, and
saves as the RunConfig says) until ``steps`` more or ``max_steps`` in all, or the input ends;
``evaluate`` restores the latest checkpoint and runs the ``eval_metric_ops`` updates (and a mean
of the loss) over the input, returning their values with ``global_step``; ``predict`` restores
it and yields the ``predictions`` example by example. The canned estimators (``DNNClassifier``,
``LinearRegressor``, ``DNNLinearCombinedClassifier``, ...) are in estimator_canned.py and are
reached here by name (``tf.estimator.DNNClassifier``); exporting for serving
(``export_savedmodel``, ``tf.estimator.export``, exporters) is in estimator_export.py;
``warm_start_from`` (a path or ``WarmStartSettings``) starts a fresh training's chosen
variables from a checkpoint.
"""

from __future__ import annotations

import collections
import inspect
import logging
import os
import re
import tempfile
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

import hetbed as _hb

_log = logging.getLogger("hetbed")


class ModeKeys:
    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


class EstimatorSpec:
    """What a ``model_fn`` returns for one mode."""

    def __init__(
        self,
        mode: str,
        predictions: Any = None,
        loss: Any = None,
        train_op: Any = None,
        eval_metric_ops: dict | None = None,
        export_outputs: Any = None,
        training_chief_hooks: Any = None,
        training_hooks: Any = None,
        scaffold: Any = None,
        evaluation_hooks: Any = None,
        prediction_hooks: Any = None,
    ):
        if mode == ModeKeys.TRAIN and (loss is None or train_op is None):
            raise ValueError("EstimatorSpec: mode TRAIN needs loss and train_op")
        if mode == ModeKeys.EVAL and loss is None:
            raise ValueError("EstimatorSpec: mode EVAL needs loss")
        if mode == ModeKeys.PREDICT and predictions is None:
            raise ValueError("EstimatorSpec: mode PREDICT needs predictions")
        self.mode = mode
        self.predictions = predictions
        self.loss = loss
        self.train_op = train_op
        self.eval_metric_ops = dict(eval_metric_ops or {})
        self.export_outputs = export_outputs
        self.training_chief_hooks = list(training_chief_hooks or [])
        self.training_hooks = list(training_hooks or [])
        self.scaffold = scaffold
        self.evaluation_hooks = list(evaluation_hooks or [])
        self.prediction_hooks = list(prediction_hooks or [])


class RunConfig:
    """Where and how often an Estimator saves (TF1's defaults)."""

    def __init__(
        self,
        model_dir: str | None = None,
        tf_random_seed: int | None = None,
        save_summary_steps: int = 100,
        save_checkpoints_steps: int | None = None,
        save_checkpoints_secs: Any = None,
        session_config: Any = None,
        keep_checkpoint_max: int = 5,
        keep_checkpoint_every_n_hours: float = 10000,
        log_step_count_steps: int = 100,
        train_distribute: Any = None,
        device_fn: Any = None,
        **unused: Any,
    ):
        if save_checkpoints_steps is not None and save_checkpoints_secs is not None:
            raise ValueError(
                "RunConfig: save_checkpoints_steps and save_checkpoints_secs cannot both be set"
            )
        if save_checkpoints_steps is None and save_checkpoints_secs is None:
            save_checkpoints_secs = 600
        self.model_dir = model_dir
        self.tf_random_seed = tf_random_seed
        self.save_summary_steps = save_summary_steps
        self.save_checkpoints_steps = save_checkpoints_steps
        self.save_checkpoints_secs = save_checkpoints_secs
        self.session_config = session_config
        self.keep_checkpoint_max = keep_checkpoint_max
        self.keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self.log_step_count_steps = log_step_count_steps

    def replace(self, **kw: Any) -> RunConfig:
        return RunConfig(**(dict(vars(self)) | kw))


def _call_input_fn(input_fn: Callable, mode: str, params: dict, config: RunConfig) -> tuple:
    names = inspect.signature(input_fn).parameters
    kw = {k: v for k, v in (("mode", mode), ("params", params), ("config", config)) if k in names}
    got = input_fn(**kw)
    if isinstance(got, _hb.data.Dataset):
        got = got.make_one_shot_iterator().get_next()
    if isinstance(got, tuple) and len(got) == 2:
        return got[0], got[1]
    return got, None


class Estimator:
    """TF1's ``tf.estimator.Estimator``."""

    def __init__(
        self,
        model_fn: Callable,
        model_dir: str | None = None,
        config: RunConfig | None = None,
        params: dict | None = None,
        warm_start_from: Any = None,
    ):
        if not callable(model_fn):
            raise TypeError(f"Estimator: model_fn must be callable, got {model_fn!r}")
        config = config or RunConfig()
        if model_dir is None:
            model_dir = config.model_dir or tempfile.mkdtemp(prefix="hetbed_estimator_")
            _log.warning("Estimator: using a temporary model_dir %s", model_dir)
        elif config.model_dir not in (None, model_dir):
            raise ValueError(
                f"Estimator: model_dir {model_dir!r} differs from config.model_dir "
                f"{config.model_dir!r}"
            )
        self._model_fn = model_fn
        self._model_dir = os.fspath(model_dir)
        self._config = config.replace(model_dir=self._model_dir)
        self._params = dict(params or {})
        if isinstance(warm_start_from, (str, bytes, os.PathLike)):
            warm_start_from = WarmStartSettings(os.fsdecode(warm_start_from))
        if warm_start_from is not None and not isinstance(warm_start_from, WarmStartSettings):
            raise TypeError(
                "Estimator: warm_start_from must be a checkpoint or SavedModel path or a "
                f"WarmStartSettings, got {warm_start_from!r}"
            )
        self._warm_start = warm_start_from

    model_dir = property(lambda self: self._model_dir)
    config = property(lambda self: self._config)
    params = property(lambda self: dict(self._params))
    model_fn = property(lambda self: self._model_fn)

    def _spec(self, features: Any, labels: Any, mode: str) -> EstimatorSpec:
        names = inspect.signature(self._model_fn).parameters
        kw: dict = {}
        if "labels" in names:
            kw["labels"] = labels
        for key, value in (("mode", mode), ("params", self._params), ("config", self._config)):
            if key in names:
                kw[key] = value
        spec = self._model_fn(features, **kw)
        if not isinstance(spec, EstimatorSpec):
            raise TypeError(
                f"Estimator: model_fn must return an EstimatorSpec, got {type(spec).__name__}"
            )
        return spec

    def _graph(self) -> Any:
        g = _hb.Graph()
        if self._config.tf_random_seed is not None:
            g.seed = int(self._config.tf_random_seed)
        return g

    def latest_checkpoint(self) -> str | None:
        return _hb.train.latest_checkpoint(self._model_dir)

    def get_variable_names(self) -> list:
        ckpt = self.latest_checkpoint()
        if ckpt is None:
            raise ValueError(f"Estimator: no checkpoint in {self._model_dir!r} yet")
        return [name for name, _ in _hb.train.list_variables(ckpt)]

    def get_variable_value(self, name: str) -> np.ndarray:
        ckpt = self.latest_checkpoint()
        if ckpt is None:
            raise ValueError(f"Estimator: no checkpoint in {self._model_dir!r} yet")
        return _hb.train.load_variable(ckpt, name)

    # ---- train -------------------------------------------------------------------------------

    def train(
        self,
        input_fn: Callable,
        hooks: Any = None,
        steps: int | None = None,
        max_steps: int | None = None,
        saving_listeners: Any = None,
    ) -> Estimator:
        """Run the TRAIN spec's ``train_op`` from the latest checkpoint: ``steps`` more, or up
        to ``max_steps`` in all, or until the input ends."""
        if steps is not None and max_steps is not None:
            raise ValueError("Estimator.train: give steps or max_steps, not both")
        if (steps is not None and steps <= 0) or (max_steps is not None and max_steps <= 0):
            raise ValueError(f"Estimator.train: steps/max_steps must be positive, got {steps}")
        if max_steps is not None:
            ckpt = self.latest_checkpoint()
            if ckpt is not None:
                done = int(_hb.train.load_variable(ckpt, "global_step"))
                if done >= max_steps:
                    _log.info("Estimator.train: already at step %d of %d", done, max_steps)
                    return self
        g = self._graph()
        with g.as_default():
            step = _hb.train.get_or_create_global_step()
            features, labels = _call_input_fn(input_fn, ModeKeys.TRAIN, self._params, self._config)
            spec = self._spec(features, labels, ModeKeys.TRAIN)
            if self._warm_start is not None and self.latest_checkpoint() is None:
                _warm_start(self._warm_start, g)  # a fresh model_dir only, as TF's
            stop = (
                [_hb.train.StopAtStepHook(num_steps=steps, last_step=max_steps)]
                if steps is not None or max_steps is not None
                else []  # until the input ends, as TF's
            )
            all_hooks = [*stop, *spec.training_hooks, *(hooks or [])]
            cfg = self._config
            save = (
                {"save_checkpoint_steps": cfg.save_checkpoints_steps}
                if cfg.save_checkpoints_steps is not None
                else {"save_checkpoint_secs": cfg.save_checkpoints_secs}
            )
            loss = None
            with _hb.train.MonitoredTrainingSession(
                checkpoint_dir=self._model_dir,
                scaffold=spec.scaffold,
                hooks=all_hooks,
                chief_only_hooks=spec.training_chief_hooks,
                save_summaries_steps=cfg.save_summary_steps,
                config=cfg.session_config,
                log_step_count_steps=cfg.log_step_count_steps,
                **save,
            ) as sess:
                while not sess.should_stop():
                    _, loss = sess.run([spec.train_op, spec.loss])
            del step
        if loss is not None:
            _log.info("Estimator.train: loss for the final step: %s", loss)
        return self

    # ---- evaluate ----------------------------------------------------------------------------

    def evaluate(
        self,
        input_fn: Callable,
        steps: int | None = None,
        hooks: Any = None,
        checkpoint_path: str | None = None,
        name: str | None = None,
    ) -> dict:
        """The EVAL spec's metrics (and the mean ``loss``) over the input (or ``steps``
        batches), from the latest checkpoint; with ``global_step``."""
        ckpt = checkpoint_path or self.latest_checkpoint()
        if ckpt is None:
            raise ValueError(
                f"Estimator.evaluate: no checkpoint in {self._model_dir!r}: train first"
            )
        g = self._graph()
        with g.as_default():
            step = _hb.train.get_or_create_global_step()
            features, labels = _call_input_fn(input_fn, ModeKeys.EVAL, self._params, self._config)
            spec = self._spec(features, labels, ModeKeys.EVAL)
            metrics = dict(spec.eval_metric_ops)
            if "loss" not in metrics:
                metrics["loss"] = _hb.metrics.mean(spec.loss, name="mean_loss")
            values = {k: v for k, (v, _) in metrics.items()}
            updates = [u for _, u in metrics.values()]
            saver = _hb.train.Saver()
            with _hb.Session(graph=g, config=self._config.session_config) as sess:
                saver.restore(sess, ckpt)
                sess.run([_hb.local_variables_initializer(), _hb.tables_initializer()])
                n = 0
                while steps is None or n < steps:
                    try:
                        sess.run(updates)
                    except _hb.errors.OutOfRangeError:
                        break
                    n += 1
                out = sess.run(values)
                out["global_step"] = sess.run(step)
        return {
            k: (v.item() if isinstance(v, np.ndarray) and v.ndim == 0 else v)
            for k, v in out.items()
        }

    # ---- predict -----------------------------------------------------------------------------

    def predict(
        self,
        input_fn: Callable,
        predict_keys: Any = None,
        hooks: Any = None,
        checkpoint_path: str | None = None,
        yield_single_examples: bool = True,
    ) -> Iterator:
        """The PREDICT spec's ``predictions`` for each example of the input (each batch, when
        not ``yield_single_examples``), from the latest checkpoint."""
        ckpt = checkpoint_path or self.latest_checkpoint()
        if ckpt is None:
            raise ValueError(
                f"Estimator.predict: no checkpoint in {self._model_dir!r}: train first"
            )
        g = self._graph()
        with g.as_default():
            _hb.train.get_or_create_global_step()
            features, _ = _call_input_fn(input_fn, ModeKeys.PREDICT, self._params, self._config)
            spec = self._spec(features, None, ModeKeys.PREDICT)
            preds = spec.predictions
            if isinstance(preds, dict) and predict_keys is not None:
                keys = [predict_keys] if isinstance(predict_keys, str) else list(predict_keys)
                missing = [k for k in keys if k not in preds]
                if missing:
                    raise ValueError(
                        f"Estimator.predict: predict_keys {missing} not in predictions"
                    )
                preds = {k: preds[k] for k in keys}
            saver = _hb.train.Saver()
            sess = _hb.Session(graph=g, config=self._config.session_config)
            try:
                saver.restore(sess, ckpt)
                sess.run([_hb.local_variables_initializer(), _hb.tables_initializer()])
                while True:
                    try:
                        batch = sess.run(preds)
                    except _hb.errors.OutOfRangeError:
                        return
                    if not yield_single_examples:
                        yield batch
                    elif isinstance(batch, dict):
                        n = len(next(iter(batch.values())))
                        for i in range(n):
                            yield {k: v[i] for k, v in batch.items()}
                    else:
                        yield from batch
            finally:
                sess.close()

    # ---- export ------------------------------------------------------------------------------

    def export_savedmodel(
        self,
        export_dir_base: Any,
        serving_input_receiver_fn: Callable,
        assets_extra: Any = None,
        as_text: bool = False,
        checkpoint_path: str | None = None,
        strip_default_attrs: bool = False,
    ) -> bytes:
        """The model for serving, from the latest checkpoint, as a SavedModel in
        ``export_dir_base/<unix time>`` (estimator_export.py); returns that folder (bytes)."""
        from hetbed.estimator_export import export_savedmodel

        return export_savedmodel(
            self,
            export_dir_base,
            serving_input_receiver_fn,
            assets_extra,
            as_text,
            checkpoint_path,
            strip_default_attrs,
        )

    export_saved_model = export_savedmodel


# ---- warm starting -------------------------------------------------------------------------------


class WarmStartSettings(
    collections.namedtuple(
        "WarmStartSettings",
        [
            "ckpt_to_initialize_from",
            "vars_to_warm_start",
            "var_name_to_vocab_info",
            "var_name_to_prev_var_name",
        ],
    )
):
    """TF1's ``tf.estimator.WarmStartSettings``: the variables a fresh training starts from a
    checkpoint (a file, a model_dir, or a SavedModel folder): ``vars_to_warm_start`` a regular
    expression over the trainable variables (default ``".*"``: all of them), a list of
    expressions or variables over the global ones, or None (none); each read from the
    checkpoint's tensor of the same name, or of ``var_name_to_prev_var_name[name]``."""

    def __new__(
        cls,
        ckpt_to_initialize_from: str,
        vars_to_warm_start: Any = ".*",
        var_name_to_vocab_info: Any = None,
        var_name_to_prev_var_name: Any = None,
    ):
        if not ckpt_to_initialize_from:
            raise ValueError("WarmStartSettings: ckpt_to_initialize_from must be given")
        if var_name_to_vocab_info:
            raise ValueError("WarmStartSettings: var_name_to_vocab_info is not supported in hetbed")
        return super().__new__(
            cls,
            os.fsdecode(ckpt_to_initialize_from),
            vars_to_warm_start,
            var_name_to_vocab_info or {},
            dict(var_name_to_prev_var_name or {}),
        )


def _warm_start(ws: WarmStartSettings, g: Any) -> None:
    """Set the chosen variables' initializers to the checkpoint's values (see
    WarmStartSettings). Raises ValueError naming a tensor the checkpoint lacks or a shape that
    differs, before any initializer is changed."""
    from hetbed.runtime.train.checkpoint import start_variable_from

    path = ws.ckpt_to_initialize_from
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        path = os.path.join(path, "variables", "variables")  # a SavedModel's variables
    elif os.path.isdir(path):
        found = _hb.train.latest_checkpoint(path)
        if found is None:
            raise ValueError(f"warm_start_from: no checkpoint in {path!r}")
        path = found
    reader = _hb.train.load_checkpoint(path)
    chosen = ws.vars_to_warm_start
    # matched as TF's get_collection(scope=...) matches: from the start of each variable's
    # name with its ":0" (a shard's own, "w/part_0:0")
    if chosen is None:
        variables: list = []
    elif isinstance(chosen, str):
        rx = re.compile(chosen)
        variables = [
            v for v in g.get_collection(_hb.GraphKeys.TRAINABLE_VARIABLES) if rx.match(v.name)
        ]
    elif isinstance(chosen, list):
        pool = g.get_collection(_hb.GraphKeys.GLOBAL_VARIABLES)
        variables = []
        for c in chosen:
            if isinstance(c, str):
                rx = re.compile(c)
                variables += [
                    v for v in pool if rx.match(v.name) and not any(v is u for u in variables)
                ]
            elif not any(c is u for u in variables):
                variables.append(c)
    else:
        raise ValueError(
            "WarmStartSettings: vars_to_warm_start must be a list or a str, got "
            f"{type(chosen).__name__}"
        )
    unused = set(ws.var_name_to_prev_var_name) - {_name(v) for v in variables}
    if unused:
        raise ValueError(
            f"warm_start_from: var_name_to_prev_var_name names variables not warm-started: "
            f"{sorted(unused)}; perhaps misspelled? The variables warm-started: "
            f"{sorted({_name(v) for v in variables})}"
        )
    plan = []
    for v in variables:
        name = _name(v)
        prev = ws.var_name_to_prev_var_name.get(name, name)
        if not reader.has_tensor(prev):
            raise ValueError(f"warm_start_from: tensor {prev!r} (for {name}) is not in {path}")
        whole = reader.get_tensor(prev)
        info = v._save_slice_info
        want = info.full_shape if info is not None else v.shape.as_list()
        if list(whole.shape) != list(want):
            raise ValueError(
                f"warm_start_from: {name} has shape {want}, the checkpoint's {prev!r} "
                f"{list(whole.shape)}"
            )
        have = reader.get_variable_to_dtype_map()[prev]
        if have != v.dtype.base_dtype:
            raise ValueError(
                f"warm_start_from: {name} is {v.dtype.base_dtype.name}, the checkpoint's {prev!r} "
                f"{have.name}"
            )
        if info is not None:  # a shard takes its part of the whole
            whole = whole[tuple(slice(o, o + n) for o, n in zip(info.var_offset, info.var_shape))]
        plan.append((v, whole))
    for v, value in plan:
        start_variable_from(v, value)
    _log.info("warm_start_from: %d variables from %s", len(plan), path)


def _name(v: Any) -> str:
    """A variable's name as warm starting sees it: a shard's is its partitioned variable's."""
    info = getattr(v, "_save_slice_info", None)
    return info.full_name if info is not None else v.op.name


# ---- train_and_evaluate -------------------------------------------------------------------------


class TrainSpec:
    def __init__(self, input_fn: Callable, max_steps: int | None = None, hooks: Any = None):
        self.input_fn, self.max_steps, self.hooks = input_fn, max_steps, list(hooks or [])


class EvalSpec:
    def __init__(
        self,
        input_fn: Callable,
        steps: int | None = 100,
        name: str | None = None,
        hooks: Any = None,
        exporters: Any = None,
        start_delay_secs: int = 120,
        throttle_secs: int = 600,
    ):
        self.input_fn, self.steps, self.name = input_fn, steps, name
        self.hooks = list(hooks or [])
        if exporters is None:
            exporters = []
        elif not isinstance(exporters, (list, tuple)):
            exporters = [exporters]
        names = [e.name for e in exporters]
        if len(set(names)) != len(names):
            raise ValueError(f"EvalSpec: exporters must have distinct names, got {names}")
        self.exporters = list(exporters)


def train_and_evaluate(estimator: Estimator, train_spec: TrainSpec, eval_spec: EvalSpec) -> tuple:
    """Train to ``train_spec.max_steps``, then evaluate once and run the exporters into
    ``model_dir/export/<name>`` (hetbed runs them in turn, in one process); returns
    ``(metrics, export results)`` as TF's local mode does."""
    estimator.train(train_spec.input_fn, hooks=train_spec.hooks, max_steps=train_spec.max_steps)
    metrics = estimator.evaluate(eval_spec.input_fn, steps=eval_spec.steps, hooks=eval_spec.hooks)
    ckpt = estimator.latest_checkpoint()
    exports = [
        e.export(
            estimator, os.path.join(estimator.model_dir, "export", e.name), ckpt, metrics, True
        )
        for e in eval_spec.exporters
    ]
    return metrics, exports or None


# ---- inputs -------------------------------------------------------------------------------------


def numpy_input_fn(
    x: Any,
    y: Any = None,
    batch_size: int = 128,
    num_epochs: int | None = 1,
    shuffle: bool | None = None,
    queue_capacity: int = 1000,
    num_threads: int = 1,
) -> Callable:
    """An input_fn of numpy data: ``x`` a dict of arrays (or one array, fed as the features)
    and ``y`` an array of labels, in batches, ``num_epochs`` passes (None: forever),
    ``shuffle`` (required, as in TF) with a buffer of ``queue_capacity``."""
    if shuffle is None:
        raise ValueError("numpy_input_fn: shuffle must be given (True or False), as in TF")
    arrays = dict(x) if isinstance(x, dict) else {"__x__": x}
    lengths = {k: len(v) for k, v in arrays.items()}
    if y is not None:
        lengths["y"] = len(y)
    if len(set(lengths.values())) > 1:
        raise ValueError(f"numpy_input_fn: x and y have different lengths: {lengths}")

    def input_fn() -> Any:
        feats = {k: np.asarray(v) for k, v in arrays.items()}
        data = (feats, np.asarray(y)) if y is not None else feats
        ds = _hb.data.Dataset.from_tensor_slices(data)
        if shuffle:
            ds = ds.shuffle(queue_capacity)
        ds = ds.repeat(num_epochs).batch(int(batch_size))
        got = ds.make_one_shot_iterator().get_next()
        f, lab = got if y is not None else (got, None)
        if "__x__" in f:
            f = f["__x__"]
        return (f, lab) if y is not None else f

    return input_fn


inputs = types.SimpleNamespace(numpy_input_fn=numpy_input_fn)

_CANNED = (
    "DNNClassifier",
    "DNNLinearCombinedClassifier",
    "DNNLinearCombinedRegressor",
    "DNNRegressor",
    "LinearClassifier",
    "LinearRegressor",
)


_EXPORT = ("export", "Exporter", "LatestExporter", "FinalExporter", "BestExporter")


def __getattr__(name: str) -> Any:
    """The canned estimators (estimator_canned.py) and exporting (estimator_export.py),
    imported when first asked for: they need ``hetbed.feature_column`` and
    ``hetbed.saved_model``, which are imported after this module."""
    if name in _CANNED:
        from hetbed import estimator_canned

        return getattr(estimator_canned, name)
    if name in _EXPORT:
        from hetbed import estimator_export

        return getattr(estimator_export, name)
    if name == "experimental":  # TF1's tf.estimator.experimental: the k-means Estimator
        from hetbed import estimator_kmeans

        mod = types.ModuleType(f"{__name__}.experimental", "tf.estimator.experimental: KMeans.")
        mod.KMeans = estimator_kmeans.KMeansClustering  # type: ignore[attr-defined]
        globals()["experimental"] = mod
        return mod
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted({*globals(), *_CANNED, *_EXPORT, "experimental"})


__all__ = [
    *_CANNED,
    "Estimator",
    "EstimatorSpec",
    "EvalSpec",
    "ModeKeys",
    "RunConfig",
    "TrainSpec",
    "WarmStartSettings",
    "inputs",
    "numpy_input_fn",
    "train_and_evaluate",
]
