"""Keras models: the functional ``Model(inputs, outputs)`` (its layers found by walking back from
the outputs through the recorded layer calls), subclassed models (layers set as attributes,
``call`` written by the user) and ``Sequential``; their weights, ``summary()`` and
``save_weights``/``load_weights`` (an ``.npz`` archive, whatever the file's name)."""

from __future__ import annotations

import os
import re
import zipfile
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hetbed as hb
from hetbed.devices.fileio import atomic_write
from hetbed.runtime.graph import Tensor
from hetbed.runtime.layers import _snake
from hetbed.runtime.nest import _flatten, _pack
from hetbed.runtime.train.checkpoint import MAGIC, update_checkpoint_state

from . import backend as K
from .engine import Input, InputLayer, Layer, Node, node_of
from .training import Training


def _unique(items: Sequence) -> list:
    out: list = []
    for x in items:
        if not any(x is y for y in out):
            out.append(x)
    return out


def _walk(inputs: list[Tensor], outputs: list[Tensor]) -> tuple[list[Node], bool]:
    """The layer calls between ``inputs`` and ``outputs`` in an order that runs them, and
    whether plain graph ops (not layers) sit between some of them."""
    stop = set(inputs)
    order: list[Node] = []
    seen: set[int] = set()
    raw = [False]
    visiting: set[Tensor] = set()

    def visit(t: Tensor) -> None:
        if t in stop or t in visiting:
            return
        visiting.add(t)
        node = node_of(t)
        if node is None:
            if t.op.type in ("Placeholder", "PlaceholderWithDefault") and t.op.inputs == []:
                return
            raw[0] = True
            for u in t.op.inputs:
                visit(u)
            return
        if id(node) in seen:
            return
        for u in node.input_tensors:
            visit(u)
        seen.add(id(node))
        order.append(node)

    for t in outputs:
        visit(t)
    return order, raw[0]


class Model(Training, Layer):
    """``Model(inputs, outputs)`` over tensors from ``keras.Input`` and layer calls, or a
    subclass that makes its layers in ``__init__`` and uses them in ``call``."""

    def __init__(self, *args: Any, **kwargs: Any):
        inputs = kwargs.pop("inputs", args[0] if args else None)
        outputs = kwargs.pop("outputs", args[1] if len(args) > 1 else None)
        name = kwargs.pop("name", None)
        self.__dict__["_tracked"] = []
        super().__init__(name=name or K.unique_object_name(_snake(type(self).__name__)), **kwargs)
        self.inputs: list[Tensor] | None = None
        self.outputs: list[Tensor] | None = None
        self._nodes: list[Node] = []
        self._raw_ops = False
        self._training_init()
        if inputs is not None:
            if outputs is None:
                raise ValueError(f"model {self.name!r}: give outputs with inputs")
            self._init_graph(inputs, outputs)

    def __setattr__(self, key: str, value: Any) -> None:
        tracked = self.__dict__.get("_tracked")
        if tracked is not None and isinstance(value, Layer) and not key.startswith("_"):
            if not any(value is t for t in tracked):
                tracked.append(value)
        super().__setattr__(key, value)

    def _init_graph(self, inputs: Any, outputs: Any) -> None:
        self._nested_inputs, self._nested_outputs = inputs, outputs
        self.inputs = [t for t in _flatten(inputs)]
        self.outputs = [t for t in _flatten(outputs)]
        for t in self.inputs:
            if not isinstance(t, Tensor):
                raise TypeError(f"model {self.name!r}: inputs must be tensors (keras.Input)")
        self._nodes, self._raw_ops = _walk(self.inputs, self.outputs)
        self.built = True

    # ---- layers and weights ---------------------------------------------------------------------
    @property
    def layers(self) -> list[Layer]:
        if self._nodes:
            firsts = [node_of(t).layer for t in self.inputs if node_of(t) is not None]
            return _unique(firsts + [n.layer for n in self._nodes])
        return list(self.__dict__["_tracked"])

    def get_layer(self, name: str | None = None, index: int | None = None) -> Layer:
        if index is not None:
            return self.layers[index]
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise ValueError(f"model {self.name!r} has no layer {name!r}; it has {self._names()}")

    def _names(self) -> list[str]:
        return [layer.name for layer in self.layers]

    def _collect(self, attr: str) -> list:
        own = list(getattr(self, "_" + attr, []))
        return _unique(own + [w for layer in self.layers for w in getattr(layer, attr)])

    @property
    def trainable_weights(self) -> list:
        return self._collect("trainable_weights") if self.trainable else []

    @property
    def non_trainable_weights(self) -> list:
        if self.trainable:
            return self._collect("non_trainable_weights")
        return self._collect("trainable_weights") + self._collect("non_trainable_weights")

    @property
    def weights(self) -> list:
        return self._collect("weights")  # layer by layer, as Keras orders them

    variables = weights
    trainable_variables = trainable_weights

    @property
    def updates(self) -> list:
        return self._collect("updates")

    @property
    def losses(self) -> list:
        return self._collect("losses")

    # ---- the model's own inputs and outputs (not those of a later call) -------------------------
    @property
    def input(self) -> Any:
        if not self.inputs:
            return Layer.input.fget(self)
        return self.inputs[0] if len(self.inputs) == 1 else list(self.inputs)

    @property
    def output(self) -> Any:
        if not self.outputs:
            return Layer.output.fget(self)
        return self.outputs[0] if len(self.outputs) == 1 else list(self.outputs)

    # ---- calling -------------------------------------------------------------------------------
    def build(self, input_shape: Any = None) -> None:
        """A subclassed model builds by being called on an input of ``input_shape``."""
        if input_shape is not None and not self.inputs and type(self).call is not Model.call:
            self._call_on([Input(batch_shape=tuple(hb.TensorShape(input_shape).as_list()))])
        self.built = True

    def _call_on(self, xs: list) -> None:
        """A subclassed model's inputs and outputs: itself called on the placeholders ``xs``."""
        out = self(xs[0] if len(xs) == 1 else xs)
        self.inputs, self.outputs, self._nested_outputs = xs, _flatten(out), out

    def _build_from_data(self, x: Any) -> None:
        if type(self).call is Model.call:
            raise ValueError(f"model {self.name!r} has no layers yet")
        arrays = [np.asarray(a) for a in (x if isinstance(x, (list, tuple)) else [x])]
        self._call_on(
            [
                Input(
                    batch_shape=(None, *a.shape[1:]), dtype=a.dtype if a.dtype.kind == "f" else None
                )
                for a in arrays
            ]
        )

    def _maybe_build(self, input_shape: Any) -> None:
        self.built = True

    def call(self, inputs: Any, training: Any = None, mask: Any = None) -> Any:
        """Run the recorded layer calls from new ``inputs``."""
        if not self._nodes and not self.inputs:
            raise NotImplementedError(
                f"model {self.name!r}: a subclassed Model must define call(inputs)"
            )
        if self._raw_ops:
            raise ValueError(
                f"model {self.name!r} has graph ops between its layers (not layers themselves), "
                "so it cannot be called on new inputs; wrap them in keras.layers.Lambda"
            )
        flat = _flatten(inputs)
        if len(flat) != len(self.inputs):
            raise ValueError(
                f"model {self.name!r} takes {len(self.inputs)} input(s), got {len(flat)}"
            )
        done = dict(zip(self.inputs, flat))
        for node in self._nodes:
            if isinstance(node.layer, InputLayer):
                continue
            args = _pack(node.inputs, [done.get(t, t) for t in _flatten(node.inputs)])
            kw = dict(node.kwargs)
            if "training" in kw and training is not None:
                kw["training"] = training
            out = node.layer(args, **kw)
            done.update(zip(node.output_tensors, _flatten(out)))
        return _pack(self._nested_outputs, [done[t] for t in self.outputs])

    # ---- summary -------------------------------------------------------------------------------
    def summary(
        self, line_length: int | None = None, positions: Any = None, print_fn: Callable = print
    ) -> None:
        """Print the table of layers, output shapes and parameter counts, as Keras does."""
        from .summary import print_summary

        print_summary(self, line_length, positions, print_fn)

    def count_params(self) -> int:
        return int(sum(np.prod(w.shape.as_list()) for w in self.weights))

    # ---- weights files -------------------------------------------------------------------------
    def _weighted_layers(self) -> list[Layer]:
        return [layer for layer in self.layers if layer.weights]

    def save_weights(self, filepath: str, overwrite: bool = True, save_format: Any = None) -> None:
        """Write every weight to ``filepath`` as a numpy ``.npz`` archive (no pickle), keyed by
        layer order and name; written atomically. The name's extension (``.h5`` too) is kept,
        the format is always npz. A TensorFlow-format name (Keras's rule: not ``.h5``/``.keras``
        /``.hdf5``, or ``save_format='tf'``) also becomes the folder's latest checkpoint in its
        ``checkpoint`` index, as TF's, so ``tf.train.latest_checkpoint(folder)`` returns it."""
        tf_format = _save_format(filepath, save_format) == "tf"
        if not overwrite and os.path.exists(filepath):
            raise FileExistsError(f"save_weights: {filepath} exists and overwrite=False")
        arrays: dict[str, np.ndarray] = {}
        for i, layer in enumerate(self._weighted_layers()):
            for j, value in enumerate(layer.get_weights()):
                arrays[f"{i:04d}/{layer.name}/{j:03d}"] = value
        os.makedirs(os.path.dirname(os.path.abspath(filepath)), exist_ok=True)

        def write(path: str) -> None:
            with open(path, "wb") as f:  # a file object: np.savez would add ".npz" to a name
                np.savez(f, **arrays)

        atomic_write(filepath, write)
        if tf_format:  # TF lists only this file (all_model_checkpoint_paths=[filepath])
            update_checkpoint_state(os.path.dirname(filepath), filepath, [filepath])

    def load_weights(self, filepath: str, by_name: bool = False, **unused: Any) -> None:
        """Read weights written by ``save_weights``: layer by layer in order (or by layer name
        with ``by_name``); counts and shapes must agree. Every layer is checked before any weight
        is assigned, so a file that does not fit changes nothing."""
        saved, order = _read_weights_file(filepath)
        layers = self._weighted_layers()
        pairs: list = []
        if by_name:
            for layer in layers:
                if layer.name in saved:
                    pairs += _checked_pairs(layer, saved[layer.name], filepath)
        else:
            if len(order) != len(layers):
                raise ValueError(
                    f"load_weights: {filepath} holds weights of {len(order)} layers ({order}), "
                    f"model {self.name!r} has {len(layers)} layers with weights "
                    f"({[x.name for x in layers]})"
                )
            for layer, lname in zip(layers, order):
                pairs += _checked_pairs(layer, saved[lname], filepath)
        K.batch_set_value(pairs)

    def save(
        self, filepath: str, overwrite: bool = True, include_optimizer: bool = True, **kwargs: Any
    ) -> None:
        """The whole model (a Sequential one): layers, weights and compile arguments, in one
        npz file (saving.py); ``keras.models.load_model`` reads it."""
        from .saving import save_model

        save_model(self, filepath, overwrite, include_optimizer)

    def get_config(self) -> dict:
        return {"name": self.name, "layers": [layer.name for layer in self.layers]}


_KEY = re.compile(r"^(\d{4})/([^/]+)/(\d{3})$")


def _save_format(filepath: str, save_format: Any) -> str:
    """'tf' or 'h5' by Keras's rule (the name's extension unless ``save_format`` is given)."""
    is_h5 = str(filepath).endswith((".h5", ".keras", ".hdf5"))
    if save_format is None:
        return "h5" if is_h5 else "tf"
    fmt = str(save_format).lower().strip()
    if fmt in ("tensorflow", "tf"):
        if is_h5:
            raise ValueError(
                'save_weights got save_format="tf"/"tensorflow", but the filepath '
                f'({filepath}) looks like an HDF5 file. Omit the ".h5"/".keras" when saving '
                "in TensorFlow format."
            )
        return "tf"
    if fmt in ("hdf5", "h5", "keras"):
        return "h5"
    raise ValueError(
        f"Unknown format. Received: `save_format`={save_format}. "
        'Was expecting one of {"tf", "h5"}.'
    )


def _read_weights_file(filepath: str) -> tuple[dict[str, list], list[str]]:
    """The arrays of a file ``save_weights`` wrote, by layer name, and the layer names in the
    file's order. A file of another kind, a truncated or corrupt one, or an npz archive not
    written by ``save_weights`` raises an error naming the file and what is wrong with it."""
    if not os.path.exists(filepath):
        if os.path.isfile(f"{filepath}.index"):
            raise FileNotFoundError(
                f"load_weights: no file {filepath}; {filepath}.index is a TensorFlow-written "
                "checkpoint, which hetbed's keras cannot read (it reads the npz files its "
                "save_weights writes)"
            )
        raise FileNotFoundError(f"load_weights: no file {filepath}")
    if os.path.isdir(filepath):
        raise IsADirectoryError(f"load_weights: {filepath} is a directory, not a weights file")
    with open(filepath, "rb") as f:
        head = f.read(6)
    what = (
        f"load_weights: {filepath} is not a weights file written by save_weights (an npz archive)"
    )
    if not head:
        raise OSError(f"{what}: it is empty")
    if head == b"\x93NUMPY":
        raise OSError(f"{what}: it is a single numpy array (.npy)")
    if head[:4] == b"\x89HDF":
        raise OSError(f"{what}: it is an HDF5 file (hetbed writes npz, even to a .h5 name)")
    if head == MAGIC[:6]:
        raise OSError(
            f"{what}: it is a tf.train.Saver checkpoint (restore it with a Saver, or write "
            "the weights with model.save_weights)"
        )
    if head[:4] != b"PK\x03\x04":
        raise OSError(f"{what}: it is not a zip archive (it starts with {head!r})")
    try:
        with np.load(filepath, allow_pickle=False) as z:
            keys = sorted(z.files)
            bad = [k for k in keys if not _KEY.match(k)]
            if bad or not keys:
                raise ValueError(
                    f"load_weights: {filepath} is an npz archive but not one written by "
                    f"save_weights: its keys {bad or keys} are not <layer index>/<layer name>/"
                    "<weight index>"
                    if keys
                    else f"load_weights: {filepath} is an npz archive with no arrays in it"
                )
            saved: dict[str, list] = {}
            order: list[str] = []
            for key in keys:
                lname = _KEY.match(key).group(2)
                if lname not in saved:
                    order.append(lname)
                    saved[lname] = []
                saved[lname].append(z[key])
    except (zipfile.BadZipFile, EOFError, zlib.error) as e:
        raise OSError(
            f"load_weights: {filepath} is truncated or corrupt ({type(e).__name__}: {e})"
        ) from e
    except ValueError as e:
        if str(e).startswith("load_weights:"):
            raise
        raise OSError(f"load_weights: {filepath} holds an array numpy cannot read: {e}") from e
    return saved, order


def _checked_pairs(layer: Layer, arrays: list, filepath: str) -> list:
    try:
        return layer._weight_pairs(arrays)
    except ValueError as e:
        raise ValueError(f"load_weights: {filepath}: {e}") from None


class Sequential(Model):
    """A stack of layers, each called on the output of the one before. Built when the first
    layer knows its input shape (``input_shape=``), else on the first data it sees."""

    def __init__(self, layers: Sequence[Layer] | None = None, name: str | None = None):
        super().__init__(name=name)
        self._stack: list[Layer] = []
        for layer in layers or []:
            self.add(layer)

    @property
    def layers(self) -> list[Layer]:
        return [x for x in self._stack if not isinstance(x, InputLayer)]

    def add(self, layer: Any) -> None:
        """Append ``layer`` (and call it on the model's output if the model is built)."""
        if isinstance(layer, Tensor) and node_of(layer) is not None:
            layer = node_of(layer).layer
        if not isinstance(layer, Layer):
            raise TypeError(f"Sequential.add takes a keras layer, got {layer!r}")
        if isinstance(layer, InputLayer):
            if self._stack:
                raise ValueError("Sequential: an InputLayer must come first")
            self._stack.append(layer)
            self._set_io([layer.output], [layer.output])
            return
        self._stack.append(layer)
        if self.outputs:
            self._set_io(self.inputs, [layer(self.outputs[0])])
        elif len(self._stack) == 1 and layer._batch_input_shape is not None:
            x = Input(
                batch_shape=layer._batch_input_shape,
                dtype=layer.dtype or K.floatx(),
                name=f"{layer.name}_input",
            )
            self._set_io([x], [layer(x)])

    def pop(self) -> None:
        if not self.layers:
            raise TypeError("Sequential.pop: there are no layers")
        self._stack.pop()
        if self.inputs:
            out = self._stack[-1].output if self.layers else self.inputs[0]
            self._set_io(self.inputs, [out])

    def _set_io(self, inputs: list, outputs: list) -> None:
        self._init_graph(inputs[0], outputs[0])

    def build(self, input_shape: Any = None) -> None:
        if not self.inputs:
            if input_shape is None:
                raise ValueError(f"model {self.name!r}: build needs an input_shape")
            x = Input(batch_shape=tuple(hb.TensorShape(input_shape).as_list()))
            out = x
            for layer in self.layers:
                out = layer(out)
            self._set_io([x], [out])
        self.built = True

    def call(self, inputs: Any, training: Any = None, mask: Any = None) -> Any:
        x = inputs
        for layer in self.layers:
            kw = {} if training is None or not layer._takes_training() else {"training": training}
            x = layer(x, **kw)
        return x

    def _build_from_data(self, x: Any) -> None:
        arr = np.asarray(x[0] if isinstance(x, (list, tuple)) else x)
        dtype = arr.dtype if arr.dtype.kind == "f" else K.floatx()
        x_in = Input(batch_shape=(None, *arr.shape[1:]), dtype=dtype)
        out = x_in
        for layer in self.layers:
            out = layer(out)
        self._set_io([x_in], [out])


def load_model(filepath: str, custom_objects: Any = None, compile: bool = True) -> Any:
    """A model ``Model.save`` wrote (saving.py)."""
    from .saving import load_model as _load

    return _load(filepath, custom_objects, compile)


def save_model(model: Any, filepath: str, overwrite: bool = True, include_optimizer: bool = True):
    """``model.save(filepath)``."""
    model.save(filepath, overwrite, include_optimizer)
