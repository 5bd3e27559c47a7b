"""Exporting an Estimator for serving (TF1's ``tf.estimator.export`` and exporters).

``Estimator.export_savedmodel(export_dir_base, serving_input_receiver_fn)`` builds a new graph:
the receiver function's placeholders (``ServingInputReceiver``: the features the model reads,
and the tensors a client feeds), ``model_fn`` in PREDICT mode on those features, the latest
checkpoint restored, and writes a SavedModel (hetbed/saved_model.py) under the tag ``serve`` in
``export_dir_base/<unix time>``: written in a temporary folder beside it and renamed, so a
reader never sees half an export. Its signatures come from the spec's ``export_outputs``
(``PredictOutput``, ``ClassificationOutput``, ``RegressionOutput``), one per key, or, without
them, one predict signature ``serving_default`` of the predictions; receiver alternatives add
``<output key>:<alternative>`` signatures. A signature an output cannot make (a classification
or regression of inputs that are not one string tensor of serialized examples) is left out with
a warning, as TF leaves it out (even when that leaves none). ``tf.saved_model.loader.load`` reads the export back.

Exporters run after ``train_and_evaluate``'s evaluation (``EvalSpec(exporters=...)``) into
``model_dir/export/<name>``: ``LatestExporter`` (keeping the newest ``exports_to_keep``),
``FinalExporter``, ``BestExporter`` (when the evaluation's loss, or ``compare_fn``, improves on
every earlier one it has seen: it reads the evaluation results this process wrote).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
import types
from collections.abc import Callable
from typing import Any

import hetbed as _hb
from hetbed.devices.fileio import publish_dir
from hetbed.runtime.graph import Tensor

_log = logging.getLogger("hetbed")

DEFAULT_SERVING = "serving_default"
_STAMP = re.compile(r"[0-9]{10}")  # an export's folder: its Unix time in seconds


# ---- receivers -----------------------------------------------------------------------------------


def _as_tensor_dict(value: Any, default_key: str, what: str) -> dict:
    if value is None:
        raise ValueError(f"{what} must be given")
    if not isinstance(value, dict):
        value = {default_key: value}
    for key, t in value.items():
        if not isinstance(key, str):
            raise ValueError(f"{what} keys must be strings, got {key!r}")
        if not isinstance(t, (Tensor, _hb.SparseTensor)):
            raise ValueError(f"{what}[{key!r}] must be a Tensor or SparseTensor, got {t!r}")
    return dict(value)


class ServingInputReceiver:
    """The features a served model reads (``features``) and the tensors a request feeds
    (``receiver_tensors``); a single tensor becomes ``{"feature": t}`` / ``{"input": t}``."""

    def __init__(
        self, features: Any, receiver_tensors: Any, receiver_tensors_alternatives: Any = None
    ):
        self.features = _as_tensor_dict(features, "feature", "ServingInputReceiver features")
        self.receiver_tensors = _as_tensor_dict(
            receiver_tensors, "input", "ServingInputReceiver receiver_tensors"
        )
        self.receiver_tensors_alternatives = {
            str(k): _as_tensor_dict(v, "input", f"receiver_tensors_alternatives[{k!r}]")
            for k, v in (receiver_tensors_alternatives or {}).items()
        }


class TensorServingInputReceiver(ServingInputReceiver):
    """A receiver whose ``features`` is one tensor, given to ``model_fn`` as it is."""

    def __init__(
        self, features: Any, receiver_tensors: Any, receiver_tensors_alternatives: Any = None
    ):
        if not isinstance(features, (Tensor, _hb.SparseTensor)):
            raise ValueError(
                f"TensorServingInputReceiver: features must be a tensor, got {features!r}"
            )
        super().__init__({"feature": features}, receiver_tensors, receiver_tensors_alternatives)
        self.features = features


def build_raw_serving_input_receiver_fn(
    features: dict, default_batch_size: int | None = None
) -> Callable[[], ServingInputReceiver]:
    """A receiver function feeding each feature as it is: one placeholder per key, named after
    it, of the feature's dtype and shape with the batch dimension ``default_batch_size``."""

    def fn() -> ServingInputReceiver:
        phs = {}
        for key, t in features.items():
            shape = _hb.TensorShape(t.shape)
            dims = None if shape.ndims is None else [default_batch_size, *shape.as_list()[1:]]
            phs[key] = _hb.placeholder(t.dtype, dims, name=key)
        return ServingInputReceiver(phs, dict(phs))

    return fn


def build_parsing_serving_input_receiver_fn(
    feature_spec: dict, default_batch_size: int | None = None
) -> Callable[[], ServingInputReceiver]:
    """A receiver function of serialized ``tf.Example`` strings (``input_example_tensor``,
    received as ``examples``) parsed by ``feature_spec``."""

    def fn() -> ServingInputReceiver:
        serialized = _hb.placeholder(_hb.string, [default_batch_size], name="input_example_tensor")
        from hetbed.runtime.ops.records import parse_example

        features = parse_example(serialized, feature_spec)
        return ServingInputReceiver(features, {"examples": serialized})

    return fn


# ---- outputs -------------------------------------------------------------------------------------


def _single_string_input(receiver_tensors: dict, what: str) -> Tensor:
    if len(receiver_tensors) != 1:
        raise ValueError(
            f"{what} input must be a single string Tensor; got {sorted(receiver_tensors)}"
        )
    (examples,) = receiver_tensors.values()
    if examples.dtype != _hb.string:
        raise ValueError(f"{what} input must be a single string Tensor; got {examples}")
    return examples


class ExportOutput:
    """An output of a served model: ``as_signature_def(receiver_tensors)``."""

    def as_signature_def(self, receiver_tensors: dict) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


class PredictOutput(ExportOutput):
    """A predict signature of ``outputs`` (a dict, or one tensor as ``{"output": t}``)."""

    def __init__(self, outputs: Any):
        self.outputs = _as_tensor_dict(outputs, "output", "PredictOutput outputs")

    def as_signature_def(self, receiver_tensors: dict) -> Any:
        return _hb.saved_model.predict_signature_def(receiver_tensors, self.outputs)


class ClassificationOutput(ExportOutput):
    """A classify signature: ``scores`` (float) and/or ``classes`` (string), of serialized
    examples."""

    def __init__(self, scores: Any = None, classes: Any = None):
        if scores is None and classes is None:
            raise ValueError("ClassificationOutput: at least one of scores and classes is needed")
        if scores is not None and not (isinstance(scores, Tensor) and scores.dtype.is_floating):
            raise ValueError(f"ClassificationOutput: scores must be a float Tensor, got {scores!r}")
        if classes is not None and not (
            isinstance(classes, Tensor) and classes.dtype == _hb.string
        ):
            raise ValueError(
                f"ClassificationOutput: classes must be a string Tensor, got {classes!r}"
            )
        self.scores, self.classes = scores, classes

    def as_signature_def(self, receiver_tensors: dict) -> Any:
        examples = _single_string_input(receiver_tensors, "Classification")
        return _hb.saved_model.classification_signature_def(examples, self.classes, self.scores)


class RegressionOutput(ExportOutput):
    """A regress signature of ``value`` (float), of serialized examples."""

    def __init__(self, value: Any):
        if not (isinstance(value, Tensor) and value.dtype.is_floating):
            raise ValueError(f"RegressionOutput: value must be a float Tensor, got {value!r}")
        self.value = value

    def as_signature_def(self, receiver_tensors: dict) -> Any:
        examples = _single_string_input(receiver_tensors, "Regression")
        return _hb.saved_model.regression_signature_def(examples, self.value)


def export_outputs_of(spec: Any) -> dict:
    """The spec's export outputs with TF's defaults: none given, a predict output of the
    predictions; one given, also the default signature."""
    outputs = spec.export_outputs
    if outputs is None:
        preds = spec.predictions
        return {DEFAULT_SERVING: PredictOutput(preds)}
    if not isinstance(outputs, dict):
        raise TypeError(f"EstimatorSpec: export_outputs must be a dict, got {outputs!r}")
    for key, out in outputs.items():
        if not isinstance(out, ExportOutput):
            raise TypeError(
                f"EstimatorSpec: export_outputs[{key!r}] must be an ExportOutput (PredictOutput, "
                f"ClassificationOutput, RegressionOutput), got {out!r}"
            )
    outputs = dict(outputs)
    if DEFAULT_SERVING not in outputs:
        if len(outputs) != 1:
            raise ValueError(
                "Multiple export_outputs were provided, but none of them is specified as the "
                f"default. Do this by naming one of them with {DEFAULT_SERVING!r}."
            )
        outputs[DEFAULT_SERVING] = next(iter(outputs.values()))
    return outputs


def signature_defs(receiver: ServingInputReceiver, outputs: dict) -> dict:
    """TF's ``build_all_signature_defs``: one signature per output (and per receiver
    alternative, ``key:alternative``); those an output cannot make are left out, warned."""
    sigs, left = {}, {}
    receivers = {None: receiver.receiver_tensors, **receiver.receiver_tensors_alternatives}
    for alt, tensors in receivers.items():
        for key, out in outputs.items():
            name = key if alt is None else f"{key}:{alt}"
            try:
                sigs[name] = out.as_signature_def(tensors)
            except ValueError as e:
                left[name] = str(e)
    for name, why in left.items():
        _log.warning("export: signature %r left out: %s", name, why)
    if not sigs:  # TF writes such an export too
        _log.warning("export: the SavedModel has no signature: a client can call nothing")
    return sigs


# ---- export_savedmodel ---------------------------------------------------------------------------


def export_savedmodel(
    estimator: Any,
    export_dir_base: Any,
    serving_input_receiver_fn: Callable,
    assets_extra: Any = None,
    as_text: bool = False,
    checkpoint_path: Any = None,
    strip_default_attrs: bool = False,
) -> bytes:
    """Write the estimator's model for serving (see the module); returns the export's folder
    as bytes, as TF1's."""
    if assets_extra:
        raise ValueError("export_savedmodel: assets_extra is not supported in hetbed")
    if serving_input_receiver_fn is None or not callable(serving_input_receiver_fn):
        raise ValueError("export_savedmodel: serving_input_receiver_fn must be a function")
    ckpt = checkpoint_path or estimator.latest_checkpoint()
    if ckpt is None:
        raise ValueError(f"Couldn't find trained model at {estimator.model_dir}.")
    base = os.fsdecode(export_dir_base)
    g = estimator._graph()
    with g.as_default():
        _hb.train.get_or_create_global_step()
        receiver = serving_input_receiver_fn()
        if not isinstance(receiver, ServingInputReceiver):
            raise TypeError(
                "export_savedmodel: serving_input_receiver_fn must return a "
                f"ServingInputReceiver, got {type(receiver).__name__}"
            )
        spec = estimator._spec(receiver.features, None, _hb.estimator.ModeKeys.PREDICT)
        sigs = signature_defs(receiver, export_outputs_of(spec))
        main_op = _hb.group(_hb.local_variables_initializer(), _hb.tables_initializer())
        saver = _hb.train.Saver()
        final = _timestamped(base)
        temp = os.path.join(os.path.dirname(final), f"temp-{os.path.basename(final)}")
        try:
            with _hb.Session(graph=g, config=estimator.config.session_config) as sess:
                saver.restore(sess, ckpt)
                b = _hb.saved_model.builder.SavedModelBuilder(temp)
                b.add_meta_graph_and_variables(
                    sess, [_hb.saved_model.tag_constants.SERVING], sigs, main_op=main_op
                )
                b.save(as_text)
            publish_dir(temp, final)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
    _log.info("export: SavedModel written to %s", final)
    return final.encode()


def _timestamped(base: str) -> str:
    """``base/<unix seconds>``, the first free one from now on."""
    os.makedirs(base, exist_ok=True)
    stamp = int(time.time())
    while os.path.exists(os.path.join(base, str(stamp))) or os.path.exists(
        os.path.join(base, f"temp-{stamp}")
    ):
        stamp += 1
    return os.path.join(base, str(stamp))


# ---- exporters -----------------------------------------------------------------------------------


class Exporter:
    """Runs after an evaluation of ``train_and_evaluate``: ``export(estimator, export_path,
    checkpoint_path, eval_result, is_the_final_export)``."""

    @property
    def name(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        raise NotImplementedError  # pragma: no cover - abstract


class _SavedModelExporter(Exporter):
    def __init__(
        self,
        name: str,
        serving_input_receiver_fn: Callable,
        assets_extra: Any = None,
        as_text: bool = False,
        exports_to_keep: int | None = 5,
    ):
        if not name:
            raise ValueError("Exporter: name must be a non-empty string")
        if exports_to_keep is not None and exports_to_keep <= 0:
            raise ValueError(
                f"Exporter: exports_to_keep must be positive or None, got {exports_to_keep}"
            )
        self._name, self._fn = name, serving_input_receiver_fn
        self._assets, self._as_text, self._keep = assets_extra, as_text, exports_to_keep

    name = property(lambda self: self._name)

    def _write(self, estimator: Any, export_path: str, checkpoint_path: Any) -> bytes:
        out = export_savedmodel(
            estimator, export_path, self._fn, self._assets, self._as_text, checkpoint_path
        )
        if self._keep is not None:  # only exports' own folders: ten ASCII digits of a time
            stamps = sorted(
                d
                for d in os.listdir(export_path)
                if _STAMP.fullmatch(d) and os.path.isdir(os.path.join(export_path, d))
            )
            for old in stamps[: -self._keep]:
                shutil.rmtree(os.path.join(export_path, old), ignore_errors=True)
        return out


class LatestExporter(_SavedModelExporter):
    """Exports after every evaluation, keeping the newest ``exports_to_keep``."""

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        return self._write(estimator, export_path, checkpoint_path)


class FinalExporter(_SavedModelExporter):
    """Exports after the last evaluation only."""

    def __init__(self, name, serving_input_receiver_fn, assets_extra=None, as_text=False):
        super().__init__(name, serving_input_receiver_fn, assets_extra, as_text, None)

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        if not is_the_final_export:
            return None
        return self._write(estimator, export_path, checkpoint_path)


def _loss_smaller(best_eval_result: dict, current_eval_result: dict) -> bool:
    for r in (best_eval_result, current_eval_result):
        if not r or "loss" not in r:
            raise ValueError("BestExporter: the evaluation results have no 'loss'")
    return current_eval_result["loss"] < best_eval_result["loss"]


class BestExporter(_SavedModelExporter):
    """Exports when an evaluation is better than every earlier one (by ``compare_fn(best,
    current)``; default: a smaller loss)."""

    def __init__(
        self,
        name: str = "best_exporter",
        serving_input_receiver_fn: Callable | None = None,
        event_file_pattern: str = "eval/*.tfevents.*",
        compare_fn: Callable = _loss_smaller,
        assets_extra: Any = None,
        as_text: bool = False,
        exports_to_keep: int | None = 5,
    ):
        if serving_input_receiver_fn is None:
            raise ValueError("BestExporter: serving_input_receiver_fn must be given")
        super().__init__(name, serving_input_receiver_fn, assets_extra, as_text, exports_to_keep)
        self._compare = compare_fn
        self._best: dict | None = None

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        if self._best is None or self._compare(self._best, eval_result):
            self._best = dict(eval_result)
            return self._write(estimator, export_path, checkpoint_path)
        return None


export = types.ModuleType(
    "hetbed.estimator.export", "tf.estimator.export: serving receivers and outputs"
)
export.__dict__.update(
    ServingInputReceiver=ServingInputReceiver,
    TensorServingInputReceiver=TensorServingInputReceiver,
    build_raw_serving_input_receiver_fn=build_raw_serving_input_receiver_fn,
    build_parsing_serving_input_receiver_fn=build_parsing_serving_input_receiver_fn,
    ExportOutput=ExportOutput,
    PredictOutput=PredictOutput,
    ClassificationOutput=ClassificationOutput,
    RegressionOutput=RegressionOutput,
)
