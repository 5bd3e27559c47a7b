"""TF 1.15's research cells of ``tf.contrib.rnn``, with its formulas and variable names (each
under the cell's scope: its ``name``, or TF's default from the class name):

* ``CoupledInputForgetGateLSTMCell`` (``coupled_input_forget_gate_lstm_cell``): gates
  ``j, f, o`` from ``[x, m] W + B``; ``c = f c' + (1 - f) act(j)`` with ``f = sigmoid(f +
  forget_bias (+ W_F_diag c'))``, ``m = sigmoid(o (+ W_O_diag c)) act(c)``, projected by ``W_P``
  (clipped to ``proj_clip``); ``W``/``W_P`` split in ``W_0``... with ``num_unit_shards``/
  ``num_proj_shards``; ``layer_norm`` normalizes ``j, f, o`` (no ``B`` then) and ``c`` with
  ``transform``/``forget``/``output``/``state`` ``gamma``/``beta``. As in TF, ``initializer``
  is not used.
* ``UGRNNCell`` (``ugrnn_cell``): ``g, c = split([x, h] kernel + bias)``, ``h = sigmoid(g +
  forget_bias) h' + (1 - ...) act(c)``.
* ``IndRNNCell`` (``ind_rnn_cell``): ``h = act(x kernel_w + h' * kernel_u + bias)``
  (``kernel_u`` ``[1, n]`` uniform in [-1, 1]).
* ``IndyGRUCell`` (``indy_gru_cell``): ``gates/kernel_w``, ``gates/kernel_u``, ``gates/bias``
  (ones), ``candidate/kernel``, ``candidate/kernel_u``, ``candidate/bias``.
* ``IndyLSTMCell`` (``indy_lstm_cell``): BasicLSTMCell's gates from ``x kernel_w + tile(h, 4) *
  kernel_u + bias``.
* ``ConvLSTMCell`` and ``Conv1DLSTMCell``/``Conv2DLSTMCell``/``Conv3DLSTMCell``
  (``conv_lstm_cell``, ``conv_1d_lstm_cell``, ...): gates ``i, j, f, o`` from a SAME convolution
  of ``concat([x, h], -1)`` with ``kernel`` (+ ``biases``), ``c = sigmoid(f + forget_bias) c' +
  sigmoid(i) tanh(j)``, ``h = tanh(c) sigmoid(o)`` (``skip_connection`` appends ``x`` to it).
* ``AttentionCellWrapper`` (``attention_cell_wrapper``): the wrapped cell fed ``[x, attns]
  kernel + bias``; attention over the last ``attn_length`` outputs (``attention/attn_w``,
  ``attn_v``, ``kernel``, ``bias``: ``softmax(sum(v tanh(H k + q W)))``), output
  ``attn_output_projection/kernel``/``bias`` of ``[cell_output, attns]``; state ``(cell state,
  attns, attn_states)``.
"""

from __future__ import annotations

from typing import Any

import hetbed as _hb
from hetbed.runtime.graph import TensorShape
from hetbed.runtime.initializers import Constant, RandomUniform
from hetbed.runtime.nest import _flatten
from hetbed.runtime.rnn_cell import LSTMStateTuple, RNNCell


def _act(activation: Any) -> Any:
    return _hb.tanh if activation is None else activation


class _ScopedCell(RNNCell):
    """A cell whose variables are made under its scope on the first call (each with its own
    shape and initializer, possibly in sub-scopes) and reused afterwards."""

    def _get(self, name: str, shape: list, dtype: Any, initializer: Any = None) -> Any:
        if self._vars is None:
            self._vars = {}
        if name not in self._vars:
            self._vars[name] = _hb.get_variable(name, shape, dtype=dtype, initializer=initializer)
        return self._vars[name]

    def __call__(self, inputs: Any, state: Any, scope: Any = None) -> tuple:
        x = _hb.convert_to_tensor(inputs)
        self._check_inputs(x)
        if self._vars is None:
            with _hb.variable_scope(scope or self._name or self._default_name) as vs:
                init = self._scope_initializer()
                if init is None:
                    return self._step(x, state)
                with _hb.variable_scope(vs, initializer=init):
                    return self._step(x, state)
        return self._step(x, state)

    def _scope_initializer(self) -> Any:
        return None

    def _check_inputs(self, x: Any) -> None:
        if x.shape.ndims != 2 or x.shape[1] is None:
            raise ValueError(
                f"{type(self).__name__}: inputs must be [batch, depth] with a known depth, got "
                f"{x.name} of shape {x.shape}"
            )


def _sharded(cell: _ScopedCell, name: str, shape: list, dtype: Any, shards: int) -> Any:
    """TF's ``_get_concat_variable``: ``name`` or ``name_0``... split along the rows."""
    if shards == 1:
        return cell._get(name, shape, dtype)
    if shards > shape[0]:
        raise ValueError(f"Too many shards: shape={shape}, num_shards={shards}")
    unit, extra = divmod(shape[0], shards)
    parts = [
        cell._get(f"{name}_{i}", [unit + (1 if i < extra else 0), *shape[1:]], dtype)
        for i in range(shards)
    ]
    return _hb.concat(parts, 0, name=f"{name}/concat")


def _layer_norm(cell: _ScopedCell, x: Any, scope: str, gain: float, shift: float) -> Any:
    """contrib.layers.layer_norm over the last axis (epsilon 1e-12) with ``scope/gamma`` and
    ``scope/beta``."""
    n = x.shape[-1]
    gamma = cell._get(f"{scope}/gamma", [n], x.dtype, Constant(gain))
    beta = cell._get(f"{scope}/beta", [n], x.dtype, Constant(shift))
    mean, var = _hb.nn.moments(x, [1], keep_dims=True)
    return (x - mean) * _hb.rsqrt(var + 1e-12) * gamma + beta


class CoupledInputForgetGateLSTMCell(_ScopedCell):
    """An LSTM whose input gate is one minus its forget gate (see the module docstring)."""

    _default_name = "coupled_input_forget_gate_lstm_cell"

    def __init__(
        self,
        num_units: int,
        use_peepholes: bool = False,
        initializer: Any = None,
        num_proj: Any = None,
        proj_clip: Any = None,
        num_unit_shards: int = 1,
        num_proj_shards: int = 1,
        forget_bias: float = 1.0,
        state_is_tuple: bool = True,
        activation: Any = None,
        reuse: Any = None,
        layer_norm: bool = False,
        norm_gain: float = 1.0,
        norm_shift: float = 0.0,
    ):
        super().__init__(None)
        if not state_is_tuple:
            raise NotImplementedError(
                "CoupledInputForgetGateLSTMCell: state_is_tuple=False (deprecated in TF) is not "
                "supported"
            )
        self._n = int(num_units)
        self._peep = use_peepholes
        self._proj = None if num_proj is None else int(num_proj)
        self._proj_clip = proj_clip
        self._unit_shards, self._proj_shards = int(num_unit_shards), int(num_proj_shards)
        self._forget_bias = float(forget_bias)
        self._activation = _act(activation)
        self._ln, self._gain, self._shift = layer_norm, norm_gain, norm_shift

    @property
    def state_size(self) -> LSTMStateTuple:
        return LSTMStateTuple(self._n, self._proj or self._n)

    @property
    def output_size(self) -> int:
        return self._proj or self._n

    def _step(self, x, state):
        c_prev, m_prev = state
        n, p, dt = self._n, self._proj or self._n, x.dtype
        w = _sharded(self, "W", [x.shape[1] + p, 3 * n], dt, self._unit_shards)
        b = self._get("B", [3 * n], dt, "zeros")
        lstm = _hb.matmul(_hb.concat([x, m_prev], 1), w)
        if not self._ln:
            lstm = _hb.nn.bias_add(lstm, b)
        j, f, o = _hb.split(lstm, 3, axis=1)
        if self._ln:
            j = _layer_norm(self, j, "transform", self._gain, self._shift)
            f = _layer_norm(self, f, "forget", self._gain, self._shift)
            o = _layer_norm(self, o, "output", self._gain, self._shift)
        if self._peep:
            w_f = self._get("W_F_diag", [n], dt)
            w_o = self._get("W_O_diag", [n], dt)
            f_act = _hb.sigmoid(f + self._forget_bias + w_f * c_prev)
        else:
            f_act = _hb.sigmoid(f + self._forget_bias)
        c = f_act * c_prev + (1 - f_act) * self._activation(j)
        if self._ln:
            c = _layer_norm(self, c, "state", self._gain, self._shift)
        if self._peep:
            m = _hb.sigmoid(o + w_o * c) * self._activation(c)
        else:
            m = _hb.sigmoid(o) * self._activation(c)
        if self._proj is not None:
            w_p = _sharded(self, "W_P", [n, self._proj], dt, self._proj_shards)
            m = _hb.matmul(m, w_p)
            if self._proj_clip is not None:
                from hetbed.compat.v1 import clip_by_value

                m = clip_by_value(m, -self._proj_clip, self._proj_clip)
        return m, LSTMStateTuple(c, m)


class UGRNNCell(_ScopedCell):
    """Collins et al.'s update-gate RNN (see the module docstring)."""

    _default_name = "ugrnn_cell"

    def __init__(
        self,
        num_units: int,
        initializer: Any = None,
        forget_bias: float = 1.0,
        activation: Any = None,
        reuse: Any = None,
    ):
        super().__init__(None)
        self._n = int(num_units)
        self._init = initializer
        self._forget_bias = float(forget_bias)
        self._activation = _act(activation)

    def _scope_initializer(self) -> Any:
        return self._init

    @property
    def state_size(self) -> int:
        return self._n

    @property
    def output_size(self) -> int:
        return self._n

    def _step(self, x, state):
        n, dt = self._n, x.dtype
        k = self._get("kernel", [x.shape[1] + n, 2 * n], dt)
        b = self._get("bias", [2 * n], dt, Constant(0.0))
        g_act, c_act = _hb.split(_hb.nn.bias_add(_hb.matmul(_hb.concat([x, state], 1), k), b), 2, 1)
        g = _hb.sigmoid(g_act + self._forget_bias)
        h = g * state + (1.0 - g) * self._activation(c_act)
        return h, h


class IndRNNCell(_ScopedCell):
    """Li et al.'s independently recurrent cell (see the module docstring)."""

    _default_name = "ind_rnn_cell"

    def __init__(
        self, num_units: int, activation: Any = None, reuse: Any = None, name=None, dtype=None
    ):
        super().__init__(name, dtype)
        self._n = int(num_units)
        self._activation = _act(activation)

    @property
    def state_size(self) -> int:
        return self._n

    @property
    def output_size(self) -> int:
        return self._n

    def _step(self, x, state):
        n, dt = self._n, x.dtype
        w = self._get("kernel_w", [x.shape[1], n], dt)
        u = self._get("kernel_u", [1, n], dt, RandomUniform(-1.0, 1.0))
        b = self._get("bias", [n], dt, "zeros")
        h = self._activation(_hb.nn.bias_add(_hb.matmul(x, w) + state * u, b))
        return h, h


class IndyGRUCell(_ScopedCell):
    """A GRU whose recurrent matrices are diagonal (see the module docstring)."""

    _default_name = "indy_gru_cell"

    def __init__(
        self,
        num_units: int,
        activation: Any = None,
        reuse: Any = None,
        kernel_initializer: Any = None,
        bias_initializer: Any = None,
        name=None,
        dtype=None,
    ):
        super().__init__(name, dtype)
        self._n = int(num_units)
        self._activation = _act(activation)
        self._k_init, self._b_init = kernel_initializer, bias_initializer

    @property
    def state_size(self) -> int:
        return self._n

    @property
    def output_size(self) -> int:
        return self._n

    def _step(self, x, state):
        n, d, dt = self._n, x.shape[1], x.dtype
        uni = RandomUniform(-1.0, 1.0)
        gw = self._get("gates/kernel_w", [d, 2 * n], dt, self._k_init)
        gu = self._get("gates/kernel_u", [1, 2 * n], dt, uni)
        gb = self._get("gates/bias", [2 * n], dt, self._b_init or Constant(1.0))
        cw = self._get("candidate/kernel", [d, n], dt, self._k_init)
        cu = self._get("candidate/kernel_u", [1, n], dt, uni)
        cb = self._get("candidate/bias", [n], dt, self._b_init or "zeros")
        gates = _hb.nn.bias_add(_hb.matmul(x, gw) + _hb.tile(state, [1, 2]) * gu, gb)
        r, u = _hb.split(_hb.sigmoid(gates), 2, axis=1)
        cand = _hb.nn.bias_add(_hb.matmul(x, cw) + (r * state) * cu, cb)
        h = u * state + (1 - u) * self._activation(cand)
        return h, h


class IndyLSTMCell(_ScopedCell):
    """A BasicLSTMCell whose recurrent matrices are diagonal (see the module docstring)."""

    _default_name = "indy_lstm_cell"

    def __init__(
        self,
        num_units: int,
        forget_bias: float = 1.0,
        activation: Any = None,
        reuse: Any = None,
        kernel_initializer: Any = None,
        bias_initializer: Any = None,
        name=None,
        dtype=None,
    ):
        super().__init__(name, dtype)
        self._n = int(num_units)
        self._forget_bias = float(forget_bias)
        self._activation = _act(activation)
        self._k_init, self._b_init = kernel_initializer, bias_initializer

    @property
    def state_size(self) -> LSTMStateTuple:
        return LSTMStateTuple(self._n, self._n)

    @property
    def output_size(self) -> int:
        return self._n

    def _step(self, x, state):
        c, h = state
        n, dt = self._n, x.dtype
        w = self._get("kernel_w", [x.shape[1], 4 * n], dt, self._k_init)
        u = self._get("kernel_u", [1, 4 * n], dt, RandomUniform(-1.0, 1.0))
        b = self._get("bias", [4 * n], dt, self._b_init or "zeros")
        gates = _hb.nn.bias_add(_hb.matmul(x, w) + _hb.tile(h, [1, 4]) * u, b)
        i, j, f, o = _hb.split(gates, 4, axis=1)
        new_c = c * _hb.sigmoid(f + self._forget_bias) + _hb.sigmoid(i) * self._activation(j)
        new_h = self._activation(new_c) * _hb.sigmoid(o)
        return new_h, LSTMStateTuple(new_c, new_h)


class ConvLSTMCell(_ScopedCell):
    """Shi et al.'s convolutional LSTM over ``[batch, *spatial, channels]`` inputs (see the
    module docstring)."""

    _default_name = "conv_lstm_cell"

    def __init__(
        self,
        conv_ndims: int,
        input_shape: Any,
        output_channels: int,
        kernel_shape: Any,
        use_bias: bool = True,
        skip_connection: bool = False,
        forget_bias: float = 1.0,
        initializers: Any = None,
        name: str | None = None,
    ):
        super().__init__(name)
        input_shape = list(input_shape)
        if conv_ndims != len(input_shape) - 1:
            raise ValueError(f"Invalid input_shape {input_shape} for conv_ndims={conv_ndims}.")
        if conv_ndims not in (1, 2, 3):
            raise ValueError(f"ConvLSTMCell: conv_ndims must be 1, 2 or 3, got {conv_ndims}")
        self._nd = int(conv_ndims)
        self._input_shape = input_shape
        self._out = int(output_channels)
        self._kernel_shape = list(kernel_shape)
        if len(self._kernel_shape) != self._nd:
            raise ValueError(
                f"ConvLSTMCell: kernel_shape {self._kernel_shape} must have {self._nd} entries"
            )
        self._use_bias = use_bias
        self._skip = skip_connection
        self._forget_bias = float(forget_bias)
        total = self._out + (input_shape[-1] if skip_connection else 0)
        self._state_shape = TensorShape(input_shape[:-1] + [self._out])
        self._output_shape = TensorShape(input_shape[:-1] + [total])

    @property
    def state_size(self) -> LSTMStateTuple:
        return LSTMStateTuple(self._state_shape, self._state_shape)

    @property
    def output_size(self) -> TensorShape:
        return self._output_shape

    def zero_state(self, batch_size: Any, dtype: Any) -> LSTMStateTuple:
        with _hb.name_scope(f"{type(self).__name__}ZeroState"):
            dims = [batch_size, *self._state_shape.as_list()]
            z = _hb.zeros(_hb.stack(dims) if hasattr(batch_size, "dtype") else dims, dtype)
            return LSTMStateTuple(z, _hb.identity(z))

    def _zero_state_like(self, x: Any, dtype: Any) -> LSTMStateTuple:
        return self.zero_state(_hb.shape(x)[0], dtype)

    def _check_inputs(self, x: Any) -> None:
        if x.shape.ndims != self._nd + 2:
            raise ValueError(
                f"{type(self).__name__}: inputs must be [batch, {self._nd} spatial dims, "
                f"channels], got {x.name} of shape {x.shape}"
            )

    def _conv(self, args: list, features: int) -> Any:
        depth = sum(int(a.shape[-1]) for a in args)
        dt = args[0].dtype
        kernel = self._get("kernel", [*self._kernel_shape, depth, features], dt)
        x = args[0] if len(args) == 1 else _hb.concat(args, axis=self._nd + 1)
        if self._nd == 1:
            res = _hb.nn.conv1d(x, kernel, 1, padding="SAME")
        elif self._nd == 2:
            res = _hb.nn.conv2d(x, kernel, [1, 1, 1, 1], padding="SAME")
        else:
            res = _hb.nn.conv3d(x, kernel, [1, 1, 1, 1, 1], padding="SAME")
        if not self._use_bias:
            return res
        return res + self._get("biases", [features], dt, Constant(0.0))

    def _step(self, x, state):
        cell, hidden = state
        gates = _hb.split(self._conv([x, hidden], 4 * self._out), 4, axis=self._nd + 1)
        i, j, f, o = gates
        new_cell = _hb.sigmoid(f + self._forget_bias) * cell
        new_cell += _hb.sigmoid(i) * _hb.tanh(j)
        output = _hb.tanh(new_cell) * _hb.sigmoid(o)
        if self._skip:
            output = _hb.concat([output, x], axis=-1)
        return output, LSTMStateTuple(new_cell, output)


class Conv1DLSTMCell(ConvLSTMCell):
    """1-D convolutional LSTM (``ConvLSTMCell`` with ``conv_ndims=1``)."""

    def __init__(self, name: str = "conv_1d_lstm_cell", **kwargs: Any):
        super().__init__(conv_ndims=1, name=name, **kwargs)


class Conv2DLSTMCell(ConvLSTMCell):
    """2-D convolutional LSTM (``ConvLSTMCell`` with ``conv_ndims=2``)."""

    def __init__(self, name: str = "conv_2d_lstm_cell", **kwargs: Any):
        super().__init__(conv_ndims=2, name=name, **kwargs)


class Conv3DLSTMCell(ConvLSTMCell):
    """3-D convolutional LSTM (``ConvLSTMCell`` with ``conv_ndims=3``)."""

    def __init__(self, name: str = "conv_3d_lstm_cell", **kwargs: Any):
        super().__init__(conv_ndims=3, name=name, **kwargs)


class AttentionCellWrapper(_ScopedCell):
    """``cell`` with attention over its last ``attn_length`` outputs (Cheng et al. 2016; see
    the module docstring)."""

    _default_name = "attention_cell_wrapper"

    def __init__(
        self,
        cell: RNNCell,
        attn_length: int,
        attn_size: Any = None,
        attn_vec_size: Any = None,
        input_size: Any = None,
        state_is_tuple: bool = True,
        reuse: Any = None,
    ):
        super().__init__(None)
        if not hasattr(cell, "state_size") or not callable(cell):
            raise TypeError(f"AttentionCellWrapper: cell must be an RNNCell, got {cell!r}")
        if not state_is_tuple:
            raise NotImplementedError(
                "AttentionCellWrapper: state_is_tuple=False (deprecated in TF) is not supported"
            )
        if attn_length <= 0:
            raise ValueError(f"attn_length should be greater than zero, got {attn_length}")
        self._cell = cell
        self._attn_length = int(attn_length)
        self._attn_size = int(cell.output_size if attn_size is None else attn_size)
        self._attn_vec_size = int(self._attn_size if attn_vec_size is None else attn_vec_size)
        self._input_size = input_size

    @property
    def state_size(self) -> tuple:
        return (self._cell.state_size, self._attn_size, self._attn_size * self._attn_length)

    @property
    def output_size(self) -> int:
        return self._attn_size

    def _linear(self, prefix: str, args: list, size: int) -> Any:
        depth = sum(int(a.shape[1]) for a in args)
        dt = args[0].dtype
        k = self._get(f"{prefix}kernel", [depth, size], dt)
        b = self._get(f"{prefix}bias", [size], dt, Constant(0.0))
        x = args[0] if len(args) == 1 else _hb.concat(args, 1)
        return _hb.nn.bias_add(_hb.matmul(x, k), b)

    def _step(self, x, state):
        if not isinstance(state, tuple) or len(state) != 3:
            raise TypeError(
                "AttentionCellWrapper: state must be (cell state, attns, attn_states), got "
                f"{type(state).__name__}"
            )
        cell_state, attns, attn_states = state
        L, A = self._attn_length, self._attn_size  # noqa: N806
        attn_states = _hb.reshape(attn_states, [-1, L, A])
        input_size = self._input_size or int(x.shape[1])
        inputs = self._linear("", [x, attns], input_size)
        cell_output, new_state = self._cell(inputs, cell_state)
        new_state_cat = _hb.concat(_flatten(new_state), 1)
        new_attns, new_attn_states = self._attention(new_state_cat, attn_states)
        output = self._linear("attn_output_projection/", [cell_output, new_attns], A)
        new_attn_states = _hb.concat([new_attn_states, _hb.expand_dims(output, 1)], 1)
        new_attn_states = _hb.reshape(new_attn_states, [-1, L * A])
        return output, (new_state, new_attns, new_attn_states)

    def _attention(self, query: Any, attn_states: Any) -> tuple:
        L, A, V = self._attn_length, self._attn_size, self._attn_vec_size  # noqa: N806
        dt = query.dtype
        k = self._get("attention/attn_w", [1, 1, A, V], dt)
        v = self._get("attention/attn_v", [V], dt)
        hidden = _hb.reshape(attn_states, [-1, L, 1, A])
        features = _hb.nn.conv2d(hidden, k, [1, 1, 1, 1], "SAME")
        y = _hb.reshape(self._linear("attention/", [query], V), [-1, 1, 1, V])
        s = _hb.reduce_sum(v * _hb.tanh(features + y), [2, 3])
        a = _hb.nn.softmax(s)
        d = _hb.reduce_sum(_hb.reshape(a, [-1, L, 1, 1]) * hidden, [1, 2])
        new_attns = _hb.reshape(d, [-1, A])
        new_attn_states = attn_states[:, 1:, :]
        return new_attns, new_attn_states


class LayerNormLSTMCell(_ScopedCell):
    """contrib.rnn's LSTM with optional layer normalization of its gates and cell (before the
    nonlinearities), peepholes, cell clipping and a projection (see the module docstring)."""

    _default_name = "layer_norm_lstm_cell"

    def __init__(
        self,
        num_units: int,
        use_peepholes: bool = False,
        cell_clip: Any = None,
        initializer: Any = None,
        num_proj: Any = None,
        proj_clip: Any = None,
        forget_bias: float = 1.0,
        activation: Any = None,
        layer_norm: bool = False,
        norm_gain: float = 1.0,
        norm_shift: float = 0.0,
        reuse: Any = None,
    ):
        super().__init__(None)
        self._n = int(num_units)
        self._peep, self._cell_clip, self._init = use_peepholes, cell_clip, initializer
        self._proj = None if num_proj is None else int(num_proj)
        self._proj_clip = proj_clip
        self._forget_bias = float(forget_bias)
        self._activation = _act(activation)
        self._ln, self._gain, self._shift = layer_norm, norm_gain, norm_shift

    def _scope_initializer(self) -> Any:
        return self._init

    @property
    def state_size(self) -> LSTMStateTuple:
        return LSTMStateTuple(self._n, self._proj or self._n)

    @property
    def output_size(self) -> int:
        return self._proj or self._n

    def _step(self, x, state):
        from hetbed.compat.v1 import clip_by_value

        c_prev, m_prev = state
        n, p, dt = self._n, self._proj or self._n, x.dtype
        k = self._get("kernel", [x.shape[1] + p, 4 * n], dt)
        b = self._get("bias", [4 * n], dt, Constant(0.0))
        lstm = _hb.matmul(_hb.concat([x, m_prev], 1), k)
        if not self._ln:
            lstm = _hb.nn.bias_add(lstm, b)
        i, j, f, o = _hb.split(lstm, 4, axis=1)
        if self._ln:
            g, sh = self._gain, self._shift
            i = _layer_norm(self, i, "input", g, sh)
            j = _layer_norm(self, j, "transform", g, sh)
            f = _layer_norm(self, f, "forget", g, sh)
            o = _layer_norm(self, o, "output", g, sh)
        act = self._activation
        if self._peep:
            w_f = self._get("w_f_diag", [n], dt)
            w_i = self._get("w_i_diag", [n], dt)
            w_o = self._get("w_o_diag", [n], dt)
            c = _hb.sigmoid(f + self._forget_bias + w_f * c_prev) * c_prev + _hb.sigmoid(
                i + w_i * c_prev
            ) * act(j)
        else:
            c = _hb.sigmoid(f + self._forget_bias) * c_prev + _hb.sigmoid(i) * act(j)
        if self._ln:
            c = _layer_norm(self, c, "state", self._gain, self._shift)
        if self._cell_clip is not None:
            c = clip_by_value(c, -self._cell_clip, self._cell_clip)
        if self._peep:
            m = _hb.sigmoid(o + w_o * c) * act(c)
        else:
            m = _hb.sigmoid(o) * act(c)
        if self._proj is not None:
            m = _hb.matmul(m, self._get("projection/kernel", [n, self._proj], dt))
            if self._proj_clip is not None:
                m = clip_by_value(m, -self._proj_clip, self._proj_clip)
        return m, LSTMStateTuple(c, m)


class SRUCell(_ScopedCell):
    """Lei et al.'s simple recurrent unit: ``x_bar, f, r, x_tx`` from ``x kernel``, ``f, r =
    sigmoid([f, r] + bias)``, ``c = f c' + (1 - f) x_bar``, ``h = r act(c) + (1 - r) x_tx``."""

    _default_name = "sru_cell"

    def __init__(self, num_units: int, activation: Any = None, reuse: Any = None, name=None, **kw):
        super().__init__(name, kw.get("dtype"))
        self._n = int(num_units)
        self._activation = _act(activation)

    @property
    def state_size(self) -> int:
        return self._n

    @property
    def output_size(self) -> int:
        return self._n

    def _step(self, x, state):
        n, dt = self._n, x.dtype
        k = self._get("kernel", [x.shape[1], 4 * n], dt)
        b = self._get("bias", [2 * n], dt, "zeros")
        x_bar, f_i, r_i, x_tx = _hb.split(_hb.matmul(x, k), 4, axis=1)
        f, r = _hb.split(_hb.sigmoid(_hb.nn.bias_add(_hb.concat([f_i, r_i], 1), b)), 2, 1)
        c = f * state + (1.0 - f) * x_bar
        h = r * self._activation(c) + (1.0 - r) * x_tx
        return h, c


class IntersectionRNNCell(_ScopedCell):
    """Collins et al.'s +RNN: a state gate and a depth gate; inputs of another depth than
    ``num_units`` go through ``in_projection`` (``num_in_proj``)."""

    _default_name = "intersection_rnn_cell"

    def __init__(
        self,
        num_units: int,
        num_in_proj: Any = None,
        initializer: Any = None,
        forget_bias: float = 1.0,
        y_activation: Any = None,
        reuse: Any = None,
    ):
        super().__init__(None)
        self._n = int(num_units)
        self._in_proj = num_in_proj
        self._init = initializer
        self._forget_bias = float(forget_bias)
        self._y_activation = _hb.nn.relu if y_activation is None else y_activation

    def _scope_initializer(self) -> Any:
        return self._init

    @property
    def state_size(self) -> int:
        return self._n

    @property
    def output_size(self) -> int:
        return self._n

    def _step(self, x, state):
        n, dt = self._n, x.dtype
        if x.shape[1] != n:
            if not self._in_proj:
                raise ValueError(
                    "Must have input size == output size for Intersection RNN. To fix, "
                    "num_in_proj should be set to num_units at cell init."
                )
            pk = self._get("in_projection/kernel", [x.shape[1], n], dt)
            pb = self._get("in_projection/bias", [n], dt, Constant(0.0))
            x = _hb.nn.bias_add(_hb.matmul(x, pk), pb)
        k = self._get("kernel", [2 * n, 4 * n], dt)
        b = self._get("bias", [4 * n], dt, Constant(0.0))
        mat = _hb.nn.bias_add(_hb.matmul(_hb.concat([x, state], 1), k), b)
        gh_act, h_act, gy_act, y_act = _hb.split(mat, 4, axis=1)
        h = _hb.tanh(h_act)
        y = self._y_activation(y_act)
        gh = _hb.sigmoid(gh_act + self._forget_bias)
        gy = _hb.sigmoid(gy_act + self._forget_bias)
        return gy * x + (1.0 - gy) * y, gh * state + (1.0 - gh) * h


class GLSTMCell(_ScopedCell):
    """Kuchaiev and Ginsburg's group LSTM: ``number_of_groups`` LSTMs on equal slices of the
    input and output (``group<g>/kernel``, ``bias_i``/``_j``/``_f``/``_o``, ``projection/
    kernel``)."""

    _default_name = "glstm_cell"

    def __init__(
        self,
        num_units: int,
        initializer: Any = None,
        num_proj: Any = None,
        number_of_groups: int = 1,
        forget_bias: float = 1.0,
        activation: Any = None,
        reuse: Any = None,
    ):
        super().__init__(None)
        self._n, self._groups = int(num_units), int(number_of_groups)
        self._proj = None if num_proj is None else int(num_proj)
        if self._n % self._groups:
            raise ValueError("num_units must be divisible by number_of_groups")
        if self._proj and self._proj % self._groups:
            raise ValueError("num_proj must be divisible by number_of_groups")
        self._init = initializer
        self._forget_bias = float(forget_bias)
        self._activation = _act(activation)

    def _scope_initializer(self) -> Any:
        return self._init

    @property
    def state_size(self) -> LSTMStateTuple:
        return LSTMStateTuple(self._n, self._proj or self._n)

    @property
    def output_size(self) -> int:
        return self._proj or self._n

    def _step(self, x, state):
        c_prev, m_prev = state
        n, g, dt = self._n, self._groups, x.dtype
        d = int(x.shape[1])
        if d % g:
            raise ValueError(f"input size ({d}) must be divisible by number_of_groups ({g})")
        gi, gm, gu = d // g, (self._proj or n) // g, n // g
        parts: list[list] = [[], [], [], []]
        for k in range(g):
            xg = _hb.concat([x[:, k * gi : (k + 1) * gi], m_prev[:, k * gm : (k + 1) * gm]], 1)
            w = self._get(f"group{k}/kernel", [gi + gm, 4 * gu], dt)
            for lst, t in zip(parts, _hb.split(_hb.matmul(xg, w), 4, axis=1), strict=True):
                lst.append(t)
        i, j, f, o = (
            _hb.nn.bias_add(_hb.concat(p, 1), self._get(f"bias_{q}", [n], dt, Constant(0.0)))
            for p, q in zip(parts, "ijfo", strict=True)
        )
        c = _hb.sigmoid(f + self._forget_bias) * c_prev + _hb.sigmoid(i) * _hb.tanh(j)
        m = _hb.sigmoid(o) * self._activation(c)
        if self._proj is not None:
            m = _hb.matmul(m, self._get("projection/kernel", [n, self._proj], dt))
        return m, LSTMStateTuple(c, m)


__all__ = [
    "CoupledInputForgetGateLSTMCell",
    "UGRNNCell",
    "IndRNNCell",
    "IndyGRUCell",
    "IndyLSTMCell",
    "ConvLSTMCell",
    "Conv1DLSTMCell",
    "Conv2DLSTMCell",
    "Conv3DLSTMCell",
    "AttentionCellWrapper",
    "LayerNormLSTMCell",
    "SRUCell",
    "IntersectionRNNCell",
    "GLSTMCell",
]
