"""Keras's Layer over hetbed's ``tf.layers`` Layer: Keras names (``dense``, ``dense_1`` per graph,
given when the layer is made), weights made as ``tf.Variable`` in the layer's name scope
(``dense/kernel:0``), Keras default initializers, the learning phase passed to layers that take
``training``, and a record of each call (a node) from which functional models are rebuilt."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hetbed as hb
from hetbed.runtime import layers as _rl
from hetbed.runtime.graph import Tensor, TensorShape
from hetbed.runtime.nest import _flatten

from . import backend as K


class Node:
    """One call of a layer: its input and output tensors (as given and as returned) and the
    extra arguments, enough to call the layer again on other tensors."""

    def __init__(self, layer: Layer, inputs: Any, outputs: Any, kwargs: dict):
        self.layer, self.inputs, self.outputs, self.kwargs = layer, inputs, outputs, kwargs
        self.input_tensors = [t for t in _flatten(inputs) if isinstance(t, Tensor)]
        self.output_tensors = [t for t in _flatten(outputs) if isinstance(t, Tensor)]


def node_of(t: Any) -> Node | None:
    """The layer call that made ``t``, if a Keras layer did."""
    if not isinstance(t, Tensor):
        return None
    return K._state(t.graph).history.get(t)


def _shape_text(shape: Any) -> str:
    return str(tuple(TensorShape(shape).as_list())) if TensorShape(shape).ndims is not None else "?"


class Layer(_rl.Layer):
    """Base of Keras layers: subclasses define ``build(input_shape)`` (weights by ``add_weight``)
    and ``call(inputs, training=None)``; calling the layer builds it once, in its name scope.
    Each layer keeps the arguments it was made with (``model.save``: saving.py)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        from .saving import record_init

        record_init(cls)

    def __init__(
        self,
        trainable: bool = True,
        name: str | None = None,
        dtype: Any = None,
        input_shape: Any = None,
        batch_input_shape: Any = None,
        input_dim: int | None = None,
        batch_size: int | None = None,
        weights: Any = None,
        **kwargs: Any,
    ):
        for k in ("_reuse", "_scope", "autocast", "dynamic"):
            kwargs.pop(k, None)
        if kwargs:
            raise TypeError(f"{type(self).__name__}: keyword argument(s) not understood: {kwargs}")
        super().__init__(trainable=trainable, name=name, dtype=dtype)
        if input_dim is not None and input_shape is None:
            input_shape = (input_dim,)
        if batch_input_shape is None and input_shape is not None:
            batch_input_shape = (batch_size, *tuple(input_shape))
        self._batch_input_shape = None if batch_input_shape is None else tuple(batch_input_shape)
        self._name = name or K.unique_object_name(_rl._snake(type(self).__name__))
        self._inbound_nodes: list[Node] = []
        self._initial_weights = weights
        self._build_shape: TensorShape | None = None
        self.supports_masking = False

    # ---- weights ---------------------------------------------------------------------------
    def add_weight(
        self,
        name: str,
        shape: Any = (),
        dtype: Any = None,
        initializer: Any = None,
        regularizer: Callable | None = None,
        trainable: bool = True,
        constraint: Callable | None = None,
        **unused: Any,
    ) -> hb.Variable:
        """A ``tf.Variable`` named ``<name scope>/name``, tracked by this layer; the regularizer's
        loss goes to ``layer.losses``."""
        from . import initializers

        dt = hb.as_dtype(dtype or self._dtype or K.floatx())
        init = initializers.get(initializer)
        if init is None:
            init = initializers.get("glorot_uniform" if dt.is_floating else "zeros")
        dims = [int(d) for d in shape]
        v = hb.Variable(
            lambda: init(dims, dtype=dt),
            name=name,
            trainable=trainable,
            dtype=dt,
            constraint=constraint,
        )
        (self._trainable_weights if trainable else self._non_trainable_weights).append(v)
        if regularizer is not None:
            with hb.name_scope(f"{name}/Regularizer"):
                loss = regularizer(v)
            if loss is not None:
                self._losses.append(loss)
        return v

    def add_loss(self, losses: Any, inputs: Any = None) -> None:
        self._losses.extend(x for x in _flatten(losses) if x is not None)

    def add_update(self, updates: Any, inputs: Any = None) -> None:
        self._updates.extend(_flatten(updates))

    def get_weights(self) -> list[np.ndarray]:
        return K.batch_get_value(self.weights)

    def set_weights(self, weights: Sequence) -> None:
        """Assign the arrays to ``self.weights`` in order; shapes must agree (all are checked
        before any is assigned)."""
        K.batch_set_value(self._weight_pairs(weights))

    def _weight_pairs(self, weights: Sequence) -> list:
        """(variable, array) for ``set_weights``, after checking the count and every shape."""
        ws = self.weights
        if len(weights) != len(ws):
            raise ValueError(
                f"layer {self.name!r}: set_weights got {len(weights)} arrays for its {len(ws)} "
                f"weights ({', '.join(w.name for w in ws)})"
            )
        for w, value in zip(ws, weights):
            value = np.asarray(value)
            if tuple(w.shape.as_list()) != value.shape:
                raise ValueError(
                    f"layer {self.name!r}: weight {w.name} has shape {tuple(w.shape.as_list())}, "
                    f"the array given for it {value.shape}"
                )
        return list(zip(ws, weights))

    def count_params(self) -> int:
        return int(sum(np.prod(w.shape.as_list()) for w in self.weights))

    # ---- calling -----------------------------------------------------------------------------
    def _takes_training(self) -> bool:
        return "training" in inspect.signature(self.call).parameters

    def _maybe_build(self, input_shape: Any) -> None:
        """Build (weights in the current name scope) unless built."""
        if self.built:
            return
        try:
            self.build(input_shape)
        except ValueError as e:
            if self.name in str(e):
                raise
            raise ValueError(
                f"layer {self.name!r} ({type(self).__name__}) cannot be built for input shape "
                f"{_shape_text(input_shape) if not isinstance(input_shape, list) else input_shape}"
                f": {e}"
            ) from e
        self.built = True
        self._build_shape = input_shape if isinstance(input_shape, TensorShape) else None
        if self._initial_weights is not None:
            self._pending_weights = self._initial_weights
            self._initial_weights = None

    def _check_input(self, x: Tensor) -> None:
        """An input incompatible with the shape the layer was built for raises, naming both."""
        built = self._build_shape
        if built is None or built.ndims is None or not self.weights:
            return
        got = x.shape
        bad = got.ndims is not None and got.ndims != built.ndims
        if not bad and got.ndims:
            a, b = built.as_list()[-1], got.as_list()[-1]
            bad = a is not None and b is not None and a != b
        if bad:
            raise ValueError(
                f"Input 0 of layer {self.name!r} is incompatible with the layer: it was built for "
                f"inputs of shape {_shape_text(built)}, got {x.name} of shape {_shape_text(got)}"
            )

    def __call__(self, inputs: Any, *args: Any, **kwargs: Any) -> Any:
        """Build on the first call, then ``call``; the outputs remember this call."""
        kwargs.pop("mask", None)
        if self._takes_training() and kwargs.get("training") is None:
            kwargs["training"] = K.learning_phase()
        inputs = _to_tensors(inputs)
        flat = [t for t in _flatten(inputs) if isinstance(t, Tensor)]
        g = hb.get_default_graph()
        with g.name_scope(self._name):
            if self._dtype is None and flat:
                dt = flat[0].dtype
                self._dtype = dt if dt.is_floating else hb.as_dtype(K.floatx())
            if not self.built:
                several = isinstance(inputs, list) or len(flat) != 1
                self._maybe_build([t.shape for t in flat] if several else flat[0].shape)
            elif len(flat) == 1:
                self._check_input(flat[0])
            outputs = self.call(inputs, *args, **kwargs)
        pending = getattr(self, "_pending_weights", None)
        if pending is not None:
            self._pending_weights = None
            K.get_session()
            self.set_weights(pending)
        node = Node(self, inputs, outputs, kwargs)
        self._inbound_nodes.append(node)
        history = K._state(g).history
        for t in node.output_tensors:
            history.setdefault(t, node)
        return outputs

    # ---- shapes of the first call -------------------------------------------------------------
    def _first(self, what: str) -> Node:
        if not self._inbound_nodes:
            raise AttributeError(f"layer {self.name!r} has not been called, so it has no {what}")
        return self._inbound_nodes[0]

    @property
    def input(self) -> Any:
        return self._first("input").inputs

    @property
    def output(self) -> Any:
        return self._first("output").outputs

    @property
    def input_shape(self) -> Any:
        return _shapes(self.input)

    @property
    def output_shape(self) -> Any:
        return _shapes(self.output)

    def compute_output_shape(self, input_shape: Any) -> TensorShape:
        """The output shape for ``input_shape``, found by calling the layer in a scratch graph."""
        with hb.Graph().as_default():
            x = hb.placeholder(self._dtype or K.floatx(), shape=input_shape)
            layer = type(self).from_config(self.get_config())
            return layer(x).shape

    def get_config(self) -> dict:
        return {"name": self.name, "trainable": self.trainable}

    @classmethod
    def from_config(cls, config: dict) -> Layer:
        return cls(**config)

    def __repr__(self) -> str:
        return f"<keras.layers.{type(self).__name__} {self._name!r}>"


def _shapes(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return [_shapes(t) for t in x]
    return tuple(x.shape.as_list()) if x.shape.ndims is not None else None


def _to_tensors(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return [_to_tensors(t) for t in x]
    if isinstance(x, dict):
        return {k: _to_tensors(v) for k, v in x.items()}
    if isinstance(x, (Tensor, hb.Variable)) or x is None:
        return x
    return hb.convert_to_tensor(np.asarray(x, dtype=K.floatx()) if _is_float(x) else x)


def _is_float(x: Any) -> bool:
    return isinstance(x, float) or (isinstance(x, np.ndarray) and x.dtype.kind == "f")


class InputLayer(Layer):
    """The entry of a model: a placeholder named after the layer (``input_1``)."""

    def __init__(
        self,
        input_shape: Any = None,
        batch_size: int | None = None,
        dtype: Any = None,
        input_tensor: Any = None,
        sparse: bool = False,
        name: str | None = None,
        batch_input_shape: Any = None,
        **kwargs: Any,
    ):
        if sparse:
            raise NotImplementedError("keras InputLayer: sparse inputs")
        name = name or K.unique_object_name("input", zero_based=False)
        if batch_input_shape is None and input_shape is not None:
            batch_input_shape = (batch_size, *tuple(input_shape))
        super().__init__(name=name, dtype=dtype, **kwargs)
        dt = hb.as_dtype(dtype or K.floatx())
        if input_tensor is None:
            if batch_input_shape is None:
                raise ValueError(f"InputLayer {name!r}: give input_shape or batch_input_shape")
            input_tensor = hb.placeholder(dt, shape=batch_input_shape, name=name)
        self._batch_input_shape = tuple(input_tensor.shape.as_list())
        self.built = True
        self._dtype = input_tensor.dtype
        node = Node(self, [], input_tensor, {})
        self._inbound_nodes.append(node)
        K._state(input_tensor.graph).history[input_tensor] = node

    def get_config(self) -> dict:
        return {"batch_input_shape": self._batch_input_shape, "name": self.name}


def Input(  # noqa: N802 - Keras's name
    shape: Any = None,
    batch_size: int | None = None,
    name: str | None = None,
    dtype: Any = None,
    sparse: bool = False,
    tensor: Any = None,
    batch_shape: Any = None,
    **kwargs: Any,
) -> Tensor:
    """A placeholder for a model's input: ``shape`` without the batch dimension."""
    if shape is None and batch_shape is None and tensor is None:
        raise ValueError("keras.Input: give shape (without the batch size) or batch_shape")
    if batch_shape is None and shape is not None:
        batch_shape = (batch_size, *tuple(shape))
    layer = InputLayer(
        batch_input_shape=batch_shape,
        name=name,
        dtype=dtype,
        sparse=sparse,
        input_tensor=tensor,
        **kwargs,
    )
    return layer.output
