"""Whole-model saving for Sequential and functional models: ``model.save(path)`` and
``keras.models.load_model(path)``.

The file is a numpy ``.npz`` archive (whatever its name; no pickle, no HDF5): the weights as
``save_weights`` keys them, and one JSON document (``__model__``) with each layer's class and
the arguments it was made with (numbers, strings, lists; an activation or other function by its
importable name; an initializer or regularizer by its class and ``get_config``; a wrapped layer
nested), the input shape (a functional model: its inputs, and each layer call as the layer's
name and references to the tensors it took, a model input or an earlier call's output, so that
shared layers and several inputs and outputs come back as they were), and the compile
arguments (optimizer by its class and ``get_config``, loss and metrics by name).
``load_model`` makes the layers again, builds the model, sets the weights and compiles it. The
optimizer's slots (Adam's moments, ...) are not kept: training resumes with fresh ones. A value
that cannot be written so (a lambda, a Lambda layer's function, graph ops between layers, a
model inside a model, a subclassed model) is refused naming the layer and argument, before
anything is written.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import os
from typing import Any

import numpy as np

FORMAT = "hetbed-keras-model-1"


def record_init(cls: type) -> None:
    """Make ``cls.__init__`` keep the arguments of the outermost call (``_init_args``)."""
    init = cls.__init__  # its own, or the one it inherits (a tf.layers class's)
    if getattr(init, "_records", False):
        return

    @functools.wraps(init)
    def wrapped(self: Any, *args: Any, **kwargs: Any) -> None:
        outer = "_init_args" not in self.__dict__
        if outer:
            self.__dict__["_init_args"] = (type(self), args, dict(kwargs))
        init(self, *args, **kwargs)

    wrapped._records = True  # type: ignore[attr-defined]
    cls.__init__ = wrapped  # type: ignore[misc]


def _encode(value: Any, where: str) -> Any:
    from .engine import Layer

    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if isinstance(value, np.ndarray):
        return {"__array__": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, (list, tuple)):
        return [_encode(v, where) for v in value]
    if isinstance(value, dict):
        return {str(k): _encode(v, where) for k, v in value.items()}
    if isinstance(value, Layer):
        return {"__layer__": layer_config(value)}
    if hasattr(value, "dtype") and hasattr(value, "name") and type(value).__name__ == "DType":
        return {"__dtype__": value.name}
    if callable(value) and not isinstance(value, type):
        mod, qual = getattr(value, "__module__", None), getattr(value, "__qualname__", "")
        if mod and "<" not in qual and _resolves(mod, qual, value):
            return {"__fn__": f"{mod}:{qual}"}
        known = _named_functions().get(id(value))
        if known is not None:  # tf.nn.relu and the like are made by factories: their public name
            return {"__fn__": known}
    rec = getattr(value, "__dict__", {}).get("_init_args")
    if rec is not None:  # an object that records how it was made (keras optimizers)
        cls, args, kwargs = rec
        return {
            "__made__": f"{cls.__module__}:{cls.__qualname__}",
            "args": _encode(list(args), where),
            "kwargs": _encode(kwargs, where),
        }
    get_config = getattr(value, "get_config", None)
    if callable(get_config):
        cls = type(value)
        return {
            "__obj__": f"{cls.__module__}:{cls.__qualname__}",
            "config": _encode(get_config(), where),
        }
    raise NotImplementedError(
        f"save: {where} is {value!r}, which hetbed cannot write into a model file (a lambda or an "
        "object without get_config); use model.save_weights and rebuild the model in code"
    )


@functools.cache
def _named_functions() -> dict:
    """id -> "module:name" of the public functions of the namespaces a model's arguments come
    from (tf.nn's activations, tf.math, keras.activations, ...)."""
    out: dict = {}
    for mod in (
        "hetbed.keras.activations",
        "hetbed.compat.v1.nn",
        "hetbed.compat.v1.math",
        "hetbed.compat.v1",
        "hetbed.nn",
        "hetbed",
    ):
        m = importlib.import_module(mod)
        for k, v in vars(m).items():
            if callable(v) and not k.startswith("_") and not isinstance(v, type):
                out.setdefault(id(v), f"{mod}:{k}")
    return out


def _resolves(mod: str, qual: str, value: Any) -> bool:
    try:
        obj: Any = importlib.import_module(mod)
        for part in qual.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return False
    return obj is value


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__array__" in value:
        return np.asarray(value["__array__"], dtype=value["dtype"])
    if "__layer__" in value:
        return make_layer(value["__layer__"])
    if "__dtype__" in value:
        import hetbed as hb

        return hb.as_dtype(value["__dtype__"])
    if "__fn__" in value:
        return _import(value["__fn__"])
    if "__made__" in value:
        return _import(value["__made__"])(*_decode(value["args"]), **_decode(value["kwargs"]))
    if "__obj__" in value:
        cls = _import(value["__obj__"])
        config = _decode(value["config"])
        make = getattr(cls, "from_config", None)
        return make(config) if callable(make) else cls(**config)
    return {k: _decode(v) for k, v in value.items()}


def _import(path: str) -> Any:
    mod, qual = path.split(":")
    if not mod.startswith(("hetbed", "numpy", "math")):
        raise ValueError(f"load_model: refusing to import {path!r} (not hetbed's or numpy's)")
    obj: Any = importlib.import_module(mod)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def layer_config(layer: Any) -> dict:
    rec = layer.__dict__.get("_init_args")
    if rec is None:
        raise NotImplementedError(f"save: layer {layer.name!r} did not record how it was made")
    cls, args, kwargs = rec
    where = f"layer {layer.name!r} ({cls.__name__})"
    kwargs = {**kwargs, "name": layer.name}
    return {
        "class": f"{cls.__module__}:{cls.__qualname__}",
        "args": _encode(list(args), where),
        "kwargs": _encode(kwargs, where),
    }


def make_layer(config: dict) -> Any:
    cls = _import(config["class"])
    return cls(*_decode(config["args"]), **_decode(config["kwargs"]))


def save_model(
    model: Any, filepath: str, overwrite: bool = True, include_optimizer: bool = True
) -> None:
    """Write ``model`` (a Sequential or functional model) to ``filepath`` atomically (see the
    module)."""
    from hetbed.devices.fileio import atomic_write

    from .models import Model, Sequential

    functional = isinstance(model, Model) and type(model).call is Model.call
    if type(model) is not Sequential and not functional:
        raise NotImplementedError(
            f"save: hetbed writes whole Sequential and functional models, not a subclassed "
            f"model ({type(model).__name__} {model.name!r}: its call is code); use "
            "model.save_weights and rebuild the model in code"
        )
    if not model.inputs:
        raise ValueError(f"save: model {model.name!r} is not built yet (fit it or build it first)")
    if type(model) is Sequential:
        doc: dict = {
            "format": FORMAT,
            "name": model.name,
            "input_shape": model.inputs[0].shape.as_list(),
            "input_dtype": model.inputs[0].dtype.name,
            "layers": [layer_config(layer) for layer in model.layers],
            "compile": None,
        }
    else:
        doc = {"format": FORMAT, "name": model.name, **_functional_doc(model), "compile": None}
    if not overwrite and os.path.exists(filepath):
        raise FileExistsError(f"save: {filepath} exists and overwrite=False")
    if include_optimizer and model._compile_args is not None:
        args = model._compile_args
        opt = model.optimizer
        if "_init_args" in getattr(opt, "__dict__", {}) or callable(
            getattr(opt, "get_config", None)
        ):
            doc["compile"] = {
                "optimizer": _encode(model.optimizer, "the optimizer"),
                "loss": _encode(args["loss"], "the loss"),
                "metrics": _encode(args["metrics"], "the metrics"),
                "loss_weights": _encode(args["loss_weights"], "the loss weights"),
            }
        else:  # TF's answer for a tf.train optimizer, which has no config to write
            logging.getLogger("hetbed").warning(
                "save: %s optimizers have no config, so the optimizer is not saved; compile the "
                "model again after loading it",
                type(model.optimizer).__name__,
            )
    arrays: dict = {"__model__": np.array(json.dumps(doc))}
    for i, layer in enumerate(model._weighted_layers()):
        for j, value in enumerate(layer.get_weights()):
            arrays[f"{i:04d}/{layer.name}/{j:03d}"] = value
    os.makedirs(os.path.dirname(os.path.abspath(filepath)), exist_ok=True)

    def write(path: str) -> None:
        with open(path, "wb") as f:
            np.savez(f, **arrays)

    atomic_write(filepath, write)


def load_model(filepath: str, custom_objects: Any = None, compile: bool = True) -> Any:
    """The model ``save`` wrote to ``filepath``: layers made again, weights set, compiled."""
    import zipfile

    from . import layers as _layers
    from .models import Sequential

    if not os.path.exists(filepath):
        raise OSError(f"load_model: no file {filepath}")
    try:
        with np.load(filepath, allow_pickle=False) as z:
            if "__model__" not in z.files:
                raise ValueError(
                    f"load_model: {filepath} holds no model (weights only? use load_weights)"
                )
            doc = json.loads(str(z["__model__"]))
            weights = {k: z[k] for k in z.files if k != "__model__"}
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise OSError(f"load_model: {filepath} is not a model file hetbed wrote ({e})") from None
    if doc.get("format") != FORMAT:
        raise ValueError(f"load_model: {filepath} has format {doc.get('format')!r}, not {FORMAT!r}")
    if "nodes" in doc:
        model = _functional_model(doc)
    else:
        model = Sequential(
            [_layers.InputLayer(batch_input_shape=doc["input_shape"], dtype=doc["input_dtype"])],
            name=doc["name"],
        )
        for cfg in doc["layers"]:
            model.add(make_layer(cfg))
    by_layer: dict = {}
    for key in sorted(weights):
        by_layer.setdefault(key.split("/")[1], []).append(weights[key])
    for layer in model._weighted_layers():
        if layer.name not in by_layer:
            raise ValueError(f"load_model: {filepath} has no weights for layer {layer.name!r}")
        layer.set_weights(by_layer[layer.name])
    if compile and doc.get("compile"):
        c = doc["compile"]
        model.compile(
            optimizer=_decode(c["optimizer"]),
            loss=_decode(c["loss"]),
            metrics=_decode(c["metrics"]),
            loss_weights=_decode(c["loss_weights"]),
        )
    return model


# ---- functional models: the layers, and each call of one as a node over earlier tensors ------


def _functional_doc(model: Any) -> dict:
    """The inputs, the layers and the layer calls of a functional model, each call's inputs as
    references (``["input", i]`` or ``["node", k, j]``: output j of call k)."""
    from hetbed.runtime.graph import Tensor

    from .engine import InputLayer, node_of
    from .models import Model

    if model._raw_ops:
        raise NotImplementedError(
            f"save: model {model.name!r} has graph ops between its layers (not layers), which "
            "hetbed cannot write into a model file; use model.save_weights"
        )
    refs: dict = {}
    inputs = []
    for i, t in enumerate(model.inputs):
        node = node_of(t)
        name = node.layer.name if node is not None else t.op.name
        inputs.append({"name": name, "batch_shape": t.shape.as_list(), "dtype": t.dtype.name})
        refs[t] = ["input", i]

    def ref(value: Any, where: str) -> Any:
        if isinstance(value, Tensor):
            if value not in refs:
                raise NotImplementedError(
                    f"save: {where} reads {value.name}, which is neither a model input nor a "
                    "layer's output; use model.save_weights"
                )
            return {"__ref__": refs[value]}
        if isinstance(value, (list, tuple)):
            return [ref(v, where) for v in value]
        if isinstance(value, dict):
            return {str(k): ref(v, where) for k, v in value.items()}
        return _encode(value, where)

    layers: list = []
    nodes = []
    for node in model._nodes:
        layer = node.layer
        if isinstance(layer, InputLayer):
            continue
        where = f"layer {layer.name!r}"
        if isinstance(layer, Model):
            raise NotImplementedError(
                f"save: {where} is a model inside the model; hetbed writes flat functional "
                "models (use model.save_weights)"
            )
        if not any(layer is x for x in layers):
            layers.append(layer)
        kwargs = {
            k: v
            for k, v in node.kwargs.items()
            if not (k == "training" and isinstance(v, Tensor))  # the learning phase: set anew
        }
        nodes.append(
            {
                "layer": layer.name,
                "inputs": ref(node.inputs, where),
                "kwargs": {k: ref(v, where) for k, v in kwargs.items()},
            }
        )
        k = len(nodes) - 1
        for j, t in enumerate(node.output_tensors):
            refs.setdefault(t, ["node", k, j])
    single = isinstance(model._nested_inputs, Tensor)
    return {
        "inputs": inputs,
        "single_input": single,
        "layers": [layer_config(layer) for layer in layers],
        "nodes": nodes,
        "outputs": ref(model._nested_outputs, "the model's outputs"),
    }


def _functional_model(doc: dict) -> Any:
    """The functional model of ``_functional_doc``: inputs and layers made again, then called
    as they were."""
    from hetbed.runtime.graph import Tensor
    from hetbed.runtime.nest import _flatten

    from .engine import Input
    from .models import Model

    inputs = [
        Input(batch_shape=tuple(i["batch_shape"]), dtype=i["dtype"], name=i["name"])
        for i in doc["inputs"]
    ]
    layers = {}
    for cfg in doc["layers"]:
        layer = make_layer(cfg)
        layers[layer.name] = layer
    made: dict = {("input", i): t for i, t in enumerate(inputs)}

    def value(v: Any) -> Any:
        if isinstance(v, dict) and "__ref__" in v:
            key = tuple(v["__ref__"])
            if key not in made:
                raise ValueError(f"load_model: the model file refers to {list(key)}, not made")
            return made[key]
        if isinstance(v, list):
            return [value(x) for x in v]
        if isinstance(v, dict) and not any(k.startswith("__") for k in v):
            return {k: value(x) for k, x in v.items()}
        return _decode(v)

    for k, nd in enumerate(doc["nodes"]):
        if nd["layer"] not in layers:
            raise ValueError(f"load_model: the model file calls layer {nd['layer']!r}, not made")
        out = layers[nd["layer"]](value(nd["inputs"]), **value(nd["kwargs"]))
        for j, t in enumerate(x for x in _flatten(out) if isinstance(x, Tensor)):
            made[("node", k, j)] = t
    ins = inputs[0] if doc["single_input"] else inputs
    return Model(inputs=ins, outputs=value(doc["outputs"]), name=doc["name"])
