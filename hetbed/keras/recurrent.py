"""Keras's recurrent layers with TF1's defaults: SimpleRNN, LSTM (gates i, f, c, o; kernel
``[in, 4u]``, recurrent_kernel ``[u, 4u]``, ``unit_forget_bias``; recurrent activation
hard_sigmoid), GRU (gates z, r, h; ``reset_after=False``), and the wrappers Bidirectional and
TimeDistributed. Weights are named as TF's legacy Keras names them (``lstm/lstm_cell/kernel``);
the loop over time is ``tf.nn.dynamic_rnn``'s (unrolled when the steps are known)."""

from __future__ import annotations

from typing import Any

import hetbed as hb
from hetbed.runtime.graph import Tensor
from hetbed.runtime.rnn import dynamic_rnn
from hetbed.runtime.rnn_cell import RNNCell

from . import activations, initializers, regularizers
from .engine import Layer


class _Cell(RNNCell):
    """Adapts a Keras cell's ``step(x, states)`` to ``dynamic_rnn``'s cell interface."""

    def __init__(self, layer: RNN):
        super().__init__(name=layer.cell_name)
        self.layer = layer

    @property
    def state_size(self) -> tuple:
        return tuple([self.layer.units] * self.layer.n_states)

    @property
    def output_size(self) -> int:
        return self.layer.units

    def __call__(self, inputs: Any, state: Any, scope: Any = None) -> tuple:
        h, states = self.layer.step(inputs, list(state))
        return h, tuple(states)


class RNN(Layer):
    """A recurrent layer: ``units``, ``return_sequences``, ``return_state``, ``go_backwards``,
    ``dropout`` / ``recurrent_dropout`` (one mask per sequence, shared by the gates)."""

    cell_name = "rnn_cell"
    n_states = 1
    gates = 1

    def __init__(
        self,
        units: int,
        activation: Any = "tanh",
        use_bias: bool = True,
        kernel_initializer: Any = "glorot_uniform",
        recurrent_initializer: Any = "orthogonal",
        bias_initializer: Any = "zeros",
        kernel_regularizer: Any = None,
        recurrent_regularizer: Any = None,
        bias_regularizer: Any = None,
        activity_regularizer: Any = None,
        kernel_constraint: Any = None,
        recurrent_constraint: Any = None,
        bias_constraint: Any = None,
        dropout: float = 0.0,
        recurrent_dropout: float = 0.0,
        return_sequences: bool = False,
        return_state: bool = False,
        go_backwards: bool = False,
        stateful: bool = False,
        unroll: bool = False,
        **kw: Any,
    ):
        if stateful:
            raise NotImplementedError(f"{type(self).__name__}: stateful=True is not supported")
        kw.pop("implementation", None)
        self._config = {k: v for k, v in locals().items() if k not in ("self", "kw", "__class__")}
        self._extra = self._pop_extra(kw)
        self._config.update(self._extra)
        super().__init__(**kw)
        self.units = int(units)
        self.activation = activations.get(activation)
        self.use_bias = use_bias
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.recurrent_regularizer = regularizers.get(recurrent_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.kernel_constraint, self.recurrent_constraint = kernel_constraint, recurrent_constraint
        self.bias_constraint = bias_constraint
        self.dropout, self.recurrent_dropout = float(dropout), float(recurrent_dropout)
        self.return_sequences, self.return_state = return_sequences, return_state
        self.go_backwards = go_backwards
        self._masks: tuple = (None, None)

    def _pop_extra(self, kw: dict) -> dict:
        return {}

    def get_config(self) -> dict:
        return dict(self._config, name=self.name)

    # ---- weights -------------------------------------------------------------------------------
    def _bias_init(self) -> Any:
        return self.bias_initializer

    def _bias_shape(self) -> list:
        return [self.gates * self.units]

    def build(self, input_shape: Any) -> None:
        if input_shape.ndims != 3 or input_shape[-1] is None:
            raise ValueError(
                f"layer {self.name!r} ({type(self).__name__}) takes inputs [batch, time, "
                f"features] with known features, got shape {input_shape}"
            )
        n, u = int(input_shape[-1]), self.units * self.gates
        with hb.name_scope(self.cell_name):
            self.kernel = self.add_weight(
                "kernel",
                [n, u],
                initializer=self.kernel_initializer,
                regularizer=self.kernel_regularizer,
                constraint=self.kernel_constraint,
            )
            self.recurrent_kernel = self.add_weight(
                "recurrent_kernel",
                [self.units, u],
                initializer=self.recurrent_initializer,
                regularizer=self.recurrent_regularizer,
                constraint=self.recurrent_constraint,
            )
            self.bias = None
            if self.use_bias:
                self.bias = self.add_weight(
                    "bias",
                    self._bias_shape(),
                    initializer=self._bias_init(),
                    regularizer=self.bias_regularizer,
                    constraint=self.bias_constraint,
                )

    # ---- running -------------------------------------------------------------------------------
    def _dropped(self, x: Tensor, rate: float, training: Any) -> Any:
        if not rate or (isinstance(training, (bool, int)) and not training):
            return None
        ones = hb.ones_like(x)
        mask = hb.nn.dropout(ones, rate=rate)
        if isinstance(training, (bool, int)):
            return mask
        return hb.where(hb.convert_to_tensor(training), mask, ones)

    def _inputs(self, x: Tensor) -> Tensor:
        mask = self._masks[0]
        return x if mask is None else x * mask

    def _recurrent(self, h: Tensor) -> Tensor:
        mask = self._masks[1]
        return h if mask is None else h * mask

    def step(self, x: Tensor, states: list) -> tuple[Tensor, list]:
        raise NotImplementedError

    def call(self, inputs: Tensor, training: Any = None, initial_state: Any = None) -> Any:
        x = hb.reverse(inputs, [1]) if self.go_backwards else inputs
        first = x[:, 0, :]
        h0 = hb.zeros_like(first[:, :1]) + hb.zeros([1, self.units], dtype=x.dtype)
        self._masks = (
            self._dropped(first, self.dropout, training),
            self._dropped(h0, self.recurrent_dropout, training),
        )
        state = None
        if initial_state is not None:
            given = (
                list(initial_state) if isinstance(initial_state, (list, tuple)) else [initial_state]
            )
            if len(given) != self.n_states:
                raise ValueError(
                    f"layer {self.name!r} takes {self.n_states} initial state(s), got {len(given)}"
                )
            state = tuple(hb.convert_to_tensor(s) for s in given)
        outputs, final = dynamic_rnn(
            _Cell(self), x, initial_state=state, dtype=x.dtype, scope="rnn"
        )
        self._masks = (None, None)
        out = outputs if self.return_sequences else outputs[:, -1, :]
        if self.return_state:
            return [out, *final]
        return out


class SimpleRNN(RNN):
    """h = activation(x @ kernel + h @ recurrent_kernel + bias)."""

    cell_name = "simple_rnn_cell"

    def step(self, x, states):
        z = hb.matmul(self._inputs(x), self.kernel)
        if self.bias is not None:
            z = z + self.bias
        h = self.activation(z + hb.matmul(self._recurrent(states[0]), self.recurrent_kernel))
        return h, [h]


class LSTM(RNN):
    """Gates i, f, c, o from z = x @ kernel + h @ recurrent_kernel + bias; c = f c + i act(z_c);
    h = o act(c); states [h, c]. ``unit_forget_bias`` starts the forget bias at 1."""

    cell_name = "lstm_cell"
    n_states = 2
    gates = 4

    def _pop_extra(self, kw):
        return {
            "recurrent_activation": kw.pop("recurrent_activation", "hard_sigmoid"),
            "unit_forget_bias": kw.pop("unit_forget_bias", True),
        }

    def _bias_init(self):
        if not self._extra["unit_forget_bias"]:
            return self.bias_initializer
        base, u = self.bias_initializer, self.units

        def init(shape, dtype=None, partition_info=None):
            parts = [base([u], dtype=dtype), hb.ones([u], dtype=dtype), base([2 * u], dtype=dtype)]
            return hb.concat(parts, 0)

        return init

    def step(self, x, states):
        h, c = states
        rec = activations.get(self._extra["recurrent_activation"])
        z = hb.matmul(self._inputs(x), self.kernel) + hb.matmul(
            self._recurrent(h), self.recurrent_kernel
        )
        if self.bias is not None:
            z = z + self.bias
        u = self.units
        i, f = rec(z[:, :u]), rec(z[:, u : 2 * u])
        c = f * c + i * self.activation(z[:, 2 * u : 3 * u])
        h = rec(z[:, 3 * u :]) * self.activation(c)
        return h, [h, c]


class GRU(RNN):
    """Gates z, r, h: z = rec(x Kz + h Rz + bz), r likewise, hh = act(x Kh + (r h) Rh + bh)
    (``reset_after``: act(x Kh + bh + r (h Rh + rbh)), bias ``[2, 3u]``); h = z h + (1 - z) hh."""

    cell_name = "gru_cell"
    gates = 3

    def _pop_extra(self, kw):
        return {
            "recurrent_activation": kw.pop("recurrent_activation", "hard_sigmoid"),
            "reset_after": kw.pop("reset_after", False),
        }

    def _bias_shape(self):
        return [2, 3 * self.units] if self._extra["reset_after"] else [3 * self.units]

    def step(self, x, states):
        (h,) = states
        u = self.units
        rec = activations.get(self._extra["recurrent_activation"])
        xz = hb.matmul(self._inputs(x), self.kernel)
        hr = self._recurrent(h)
        bias, rbias = self.bias, None
        if bias is not None and self._extra["reset_after"]:
            bias, rbias = self.bias[0], self.bias[1]
        if bias is not None:
            xz = xz + bias
        if self._extra["reset_after"]:
            hz = hb.matmul(hr, self.recurrent_kernel)
            if rbias is not None:
                hz = hz + rbias
            z = rec(xz[:, :u] + hz[:, :u])
            r = rec(xz[:, u : 2 * u] + hz[:, u : 2 * u])
            hh = self.activation(xz[:, 2 * u :] + r * hz[:, 2 * u :])
        else:
            rk = self.recurrent_kernel
            z = rec(xz[:, :u] + hb.matmul(hr, rk[:, :u]))
            r = rec(xz[:, u : 2 * u] + hb.matmul(hr, rk[:, u : 2 * u]))
            hh = self.activation(xz[:, 2 * u :] + hb.matmul(r * hr, rk[:, 2 * u :]))
        h = z * h + (1.0 - z) * hh
        return h, [h]


# ---- wrappers ------------------------------------------------------------------------------


class _Wrapper(Layer):
    def _inner(self) -> list[Layer]:
        raise NotImplementedError

    @property
    def trainable_weights(self) -> list:
        return [w for x in self._inner() for w in x.trainable_weights] if self.trainable else []

    @property
    def non_trainable_weights(self) -> list:
        if not self.trainable:
            return [w for x in self._inner() for w in x.weights]
        return [w for x in self._inner() for w in x.non_trainable_weights]

    @property
    def updates(self) -> list:
        return [u for x in self._inner() for u in x.updates]

    @property
    def losses(self) -> list:
        return [u for x in self._inner() for u in x.losses]


class TimeDistributed(_Wrapper):
    """Apply ``layer`` to every time step: ``[b, t, ...]`` -> ``[b, t, ...out]`` (its weights
    in this wrapper's scope: ``time_distributed/kernel``)."""

    def __init__(self, layer: Layer, **kw: Any):
        super().__init__(**kw)
        self.layer = layer

    def _inner(self):
        return [self.layer]

    def build(self, input_shape):
        if input_shape.ndims is None or input_shape.ndims < 3:
            raise ValueError(
                f"layer {self.name!r} (TimeDistributed) takes inputs of rank >= 3, got "
                f"{input_shape}"
            )
        dims = input_shape.as_list()
        self.layer._dtype = self.layer._dtype or self._dtype
        self.layer._maybe_build(hb.TensorShape([None, *dims[2:]]))

    def call(self, inputs: Tensor, training: Any = None) -> Tensor:
        dims = inputs.shape.as_list()
        flat = hb.reshape(inputs, [-1, *dims[2:]])
        kw = {"training": training} if self.layer._takes_training() else {}
        y = self.layer.call(flat, **kw)
        steps = dims[1] if dims[1] is not None else hb.shape(inputs)[1]
        if isinstance(steps, int):
            return hb.reshape(y, [-1, steps, *y.shape.as_list()[1:]])
        return hb.reshape(y, hb.concat([[-1], [steps], hb.shape(y)[1:]], 0))


class Bidirectional(_Wrapper):
    """A recurrent layer run forwards and (a copy) backwards; outputs merged by ``merge_mode``
    ('concat', 'sum', 'mul', 'ave' or None for a list)."""

    def __init__(
        self,
        layer: RNN,
        merge_mode: str | None = "concat",
        weights: Any = None,
        backward_layer: RNN | None = None,
        **kw: Any,
    ):
        super().__init__(**kw)
        if merge_mode not in ("concat", "sum", "mul", "ave", None):
            raise ValueError(f"Bidirectional: unknown merge_mode {merge_mode!r}")
        config = layer.get_config()
        config.update(name=f"forward_{layer.name}")
        self.forward_layer = type(layer)(**config)
        if backward_layer is None:
            config.update(name=f"backward_{layer.name}", go_backwards=not layer.go_backwards)
            backward_layer = type(layer)(**config)
        self.backward_layer = backward_layer
        self.merge_mode = merge_mode
        self.return_sequences, self.return_state = layer.return_sequences, layer.return_state

    def _inner(self):
        return [self.forward_layer, self.backward_layer]

    def call(self, inputs: Tensor, training: Any = None, initial_state: Any = None) -> Any:
        fw = self.forward_layer(inputs, training=training)
        bw = self.backward_layer(inputs, training=training)
        states: list = []
        if self.return_state:
            fw, *fs = fw
            bw, *bs = bw
            states = fs + bs
        if self.return_sequences:
            bw = hb.reverse(bw, [1])
        if self.merge_mode == "concat":
            out: Any = hb.concat([fw, bw], -1)
        elif self.merge_mode == "sum":
            out = fw + bw
        elif self.merge_mode == "mul":
            out = fw * bw
        elif self.merge_mode == "ave":
            out = (fw + bw) / 2.0
        else:
            out = [fw, bw]
        if self.return_state:
            return (out if isinstance(out, list) else [out]) + states
        return out
