"""Recurrent cells in TF1's shapes (``tf.nn.rnn_cell``, ``tf.contrib.rnn``).

A cell maps ``(inputs [batch, in], state)`` to ``(output, new_state)``. It creates its variables
on its first call, under the current variable scope and the cell's name (inside ``static_rnn``:
``rnn/basic_lstm_cell/kernel``, as in TF), and reuses them on later calls, as TF's layer-based
cells do. The formulas and gate orders are TF's:

* ``BasicRNNCell``: ``h' = act([x, h] W + b)``.
* ``BasicLSTMCell`` / ``LSTMCell``: ``[i, j, f, o] = [x, h] W + b``;
  ``c' = c sigmoid(f + forget_bias) + sigmoid(i) act(j)``, ``h' = act(c') sigmoid(o)``.
  ``LSTMCell`` adds peepholes (``w_f_diag c`` in f, ``w_i_diag c`` in i, ``w_o_diag c'`` in o),
  ``cell_clip``, a projection ``num_proj`` (``h' = h' P``) and ``proj_clip``.
* ``GRUCell``: ``[r, u] = sigmoid([x, h] Wg + bg)`` (bias initialized to 1),
  ``c = act([x, r h] Wc + bc)``, ``h' = u h + (1 - u) c``.

``MultiRNNCell`` stacks cells (scopes ``cell_0``, ``cell_1``, ...); ``DropoutWrapper`` drops
inputs, outputs and states with the given keep probabilities. Running a cell over time
(``static_rnn``, ``dynamic_rnn`` and their bidirectional forms) lives in rnn.py and is
re-exported here.
"""

from __future__ import annotations

from collections import namedtuple
from typing import Any

from . import dtypes as _dt
from .graph import Tensor, name_scope
from .ops import manip as _manip
from .ops import math as _math
from .ops import nn as _nn
from .registry import convert_to_tensor
from .rnn import (  # noqa: F401  (re-exported: callers import them from here)
    bidirectional_dynamic_rnn,
    dynamic_rnn,
    static_bidirectional_rnn,
    static_rnn,
)
from .variable_scope import get_variable, variable_scope

__all__ = [
    "BasicLSTMCell",
    "BasicRNNCell",
    "DropoutWrapper",
    "GRUBlockCell",
    "GRUCell",
    "LSTMBlockCell",
    "LSTMCell",
    "LSTMStateTuple",
    "MultiRNNCell",
    "RNNCell",
    "ResidualWrapper",
    "static_bidirectional_rnn",
    "static_rnn",
]
#: contrib.rnn's cells beyond tf.nn.rnn_cell's
CONTRIB = ["InputProjectionWrapper", "OutputProjectionWrapper"]


class LSTMStateTuple(namedtuple("LSTMStateTuple", ("c", "h"))):
    """An LSTM's state: the cell ``c`` and the output ``h``."""

    __slots__ = ()

    @property
    def dtype(self) -> Any:
        return self.c.dtype


from .nest import _flatten, _pack  # noqa: E402  (namedtuple states keep their type)


class RNNCell:
    """Base class: ``state_size``, ``output_size``, ``zero_state`` and ``__call__``."""

    _default_name = "rnn_cell"

    def __init__(self, name: str | None = None, dtype: Any = None, reuse: Any = None):
        self._name = name
        self._dtype = dtype
        self._vars: dict[str, Any] | None = None

    @property
    def state_size(self) -> Any:
        raise NotImplementedError

    @property
    def output_size(self) -> int:
        raise NotImplementedError

    def zero_state(self, batch_size: Any, dtype: Any) -> Any:
        """Zeros in the shape of ``state_size`` for a batch of ``batch_size`` (a Python int, or
        an integer scalar tensor such as ``tf.shape(x)[0]``, known when the step runs)."""
        dt = _dt.as_dtype(dtype)
        if isinstance(batch_size, Tensor):
            if batch_size.shape.ndims not in (None, 0) or not batch_size.dtype.is_integer:
                raise TypeError(
                    f"{type(self).__name__}.zero_state: batch_size must be an int or an integer "
                    f"scalar tensor, got {batch_size.name} ({batch_size.dtype.name}, shape "
                    f"{batch_size.shape})"
                )
            return self._zeros(lambda n: _manip.zeros([batch_size, n], dt))
        return self._zeros(lambda n: _manip.zeros([int(batch_size), n], dt))

    def _zero_state_like(self, x: Tensor, dtype: Any) -> Any:
        """Zero states with ``x``'s (possibly unknown) batch dimension."""
        dt = _dt.as_dtype(dtype)
        col = _math.zeros_like(x[:, :1], dtype=dt)  # [batch, 1]
        return self._zeros(lambda n: col + _manip.zeros([1, n], dt))

    def _zeros(self, make: Any) -> Any:
        def zeros(n: Any) -> Any:
            if isinstance(n, LSTMStateTuple):
                return LSTMStateTuple(zeros(n.c), zeros(n.h))
            if isinstance(n, tuple):
                return tuple(zeros(v) for v in n)
            return make(n)

        with name_scope(f"{type(self).__name__}ZeroState"):
            return zeros(self.state_size)

    def _variables(self, specs: dict[str, tuple], dtype: Any) -> dict[str, Any]:
        """Create (first call) or return this cell's variables; specs: name -> (shape, init)."""
        if self._vars is None:
            with variable_scope(self._name or self._default_name):
                self._vars = {
                    k: get_variable(k, shape, dtype=dtype, initializer=init)
                    for k, (shape, init) in specs.items()
                }
        return self._vars

    def __call__(self, inputs: Any, state: Any, scope: Any = None) -> tuple[Any, Any]:
        x = convert_to_tensor(inputs)
        if x.shape.ndims != 2 or x.shape[1] is None:
            raise ValueError(
                f"{type(self).__name__}: inputs must be [batch, depth] with a known depth, got "
                f"{x.name} of shape {x.shape}"
            )
        if scope is not None and self._vars is None:
            with variable_scope(scope):
                return self._step(x, state)
        return self._step(x, state)

    def _step(self, x: Tensor, state: Any) -> tuple[Any, Any]:
        raise NotImplementedError

    def __deepcopy__(self, memo: dict) -> RNNCell:
        """A copy with the same configuration that has not made its variables yet: called
        again under a reusing scope it finds the original's by name (TF1's legacy seq2seq
        functions deep-copy a cell for the encoder)."""
        import copy

        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            if k == "_vars" or (k == "_built" and isinstance(v, bool)):
                new.__dict__[k] = None if k == "_vars" else False
            elif isinstance(v, RNNCell):
                new.__dict__[k] = copy.deepcopy(v, memo)
            elif isinstance(v, (list, tuple)) and any(isinstance(u, RNNCell) for u in v):
                new.__dict__[k] = type(v)(copy.deepcopy(u, memo) for u in v)
            else:
                new.__dict__[k] = v
        return new


def _linear(args: list, kernel: Any, bias: Any) -> Tensor:
    x = args[0] if len(args) == 1 else _manip.concat(args, 1)
    return _nn.bias_add(_math.matmul(x, kernel), bias)


def _act(activation: Any) -> Any:
    return _nn.tanh if activation is None else activation


class BasicRNNCell(RNNCell):
    _default_name = "basic_rnn_cell"

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
        n, d = self._n, x.shape[1]
        v = self._variables({"kernel": ([d + n, n], None), "bias": ([n], "zeros")}, x.dtype)
        h = self._activation(_linear([x, state], v["kernel"], v["bias"]))
        return h, h


class BasicLSTMCell(RNNCell):
    _default_name = "basic_lstm_cell"

    def __init__(
        self,
        num_units: int,
        forget_bias: float = 1.0,
        state_is_tuple: bool = True,
        activation: Any = None,
        reuse: Any = None,
        name: str | None = None,
        dtype: Any = None,
    ):
        super().__init__(name, dtype)
        if not state_is_tuple:
            raise NotImplementedError(
                f"{type(self).__name__}: state_is_tuple=False (deprecated in TF) is not supported"
            )
        self._n = int(num_units)
        self._forget_bias = float(forget_bias)
        self._activation = _act(activation)

    @property
    def state_size(self) -> LSTMStateTuple:
        return LSTMStateTuple(self._n, self._n)

    @property
    def output_size(self) -> int:
        return self._n

    def _step(self, x, state):
        c, h = state
        n, d = self._n, x.shape[1]
        v = self._variables({"kernel": ([d + n, 4 * n], None), "bias": ([4 * n], "zeros")}, x.dtype)
        i, j, f, o = _manip.split(_linear([x, h], v["kernel"], v["bias"]), 4, axis=1)
        sig = _nn.sigmoid
        new_c = c * sig(f + self._forget_bias) + sig(i) * self._activation(j)
        new_h = self._activation(new_c) * sig(o)
        return new_h, LSTMStateTuple(new_c, new_h)


class LSTMCell(BasicLSTMCell):
    _default_name = "lstm_cell"

    def __init__(
        self,
        num_units: int,
        use_peepholes: bool = False,
        cell_clip: float | None = None,
        initializer: Any = None,
        num_proj: int | None = None,
        proj_clip: float | None = None,
        num_unit_shards: Any = None,
        num_proj_shards: Any = None,
        forget_bias: float = 1.0,
        state_is_tuple: bool = True,
        activation: Any = None,
        reuse: Any = None,
        name: str | None = None,
        dtype: Any = None,
    ):
        super().__init__(num_units, forget_bias, state_is_tuple, activation, reuse, name, dtype)
        self._peep = bool(use_peepholes)
        self._cell_clip = cell_clip
        self._init = initializer
        self._proj = None if num_proj is None else int(num_proj)
        self._proj_clip = proj_clip

    @property
    def state_size(self) -> LSTMStateTuple:
        return LSTMStateTuple(self._n, self._proj or self._n)

    @property
    def output_size(self) -> int:
        return self._proj or self._n

    def _step(self, x, state):
        c, h = state
        n, d, p = self._n, x.shape[1], self._proj or self._n
        specs: dict[str, tuple] = {
            "kernel": ([d + p, 4 * n], self._init),
            "bias": ([4 * n], "zeros"),
        }
        if self._peep:
            specs |= {k: ([n], self._init) for k in ("w_f_diag", "w_i_diag", "w_o_diag")}
        if self._proj is not None:
            specs["projection/kernel"] = ([n, self._proj], self._init)
        v = self._variables(specs, x.dtype)
        i, j, f, o = _manip.split(_linear([x, h], v["kernel"], v["bias"]), 4, axis=1)
        sig, act = _nn.sigmoid, self._activation
        if self._peep:
            new_c = sig(f + self._forget_bias + v["w_f_diag"] * c) * c + sig(
                i + v["w_i_diag"] * c
            ) * act(j)
        else:
            new_c = sig(f + self._forget_bias) * c + sig(i) * act(j)
        if self._cell_clip is not None:
            new_c = _math.minimum(_math.maximum(new_c, -self._cell_clip), self._cell_clip)
        if self._peep:
            m = sig(o + v["w_o_diag"] * new_c) * act(new_c)
        else:
            m = sig(o) * act(new_c)
        if self._proj is not None:
            m = _math.matmul(m, v["projection/kernel"])
            if self._proj_clip is not None:
                m = _math.minimum(_math.maximum(m, -self._proj_clip), self._proj_clip)
        return m, LSTMStateTuple(new_c, m)


class GRUCell(RNNCell):
    _default_name = "gru_cell"

    def __init__(
        self,
        num_units: int,
        activation: Any = None,
        reuse: Any = None,
        kernel_initializer: Any = None,
        bias_initializer: Any = None,
        name: str | None = None,
        dtype: Any = None,
    ):
        super().__init__(name, dtype)
        self._n = int(num_units)
        self._activation = _act(activation)
        self._kinit = kernel_initializer
        self._binit = bias_initializer

    @property
    def state_size(self) -> int:
        return self._n

    @property
    def output_size(self) -> int:
        return self._n

    def _step(self, x, state):
        n, d = self._n, x.shape[1]
        gate_bias = self._binit if self._binit is not None else 1.0
        cand_bias = self._binit if self._binit is not None else "zeros"
        v = self._variables(
            {
                "gates/kernel": ([d + n, 2 * n], self._kinit),
                "gates/bias": ([2 * n], _const_init(gate_bias)),
                "candidate/kernel": ([d + n, n], self._kinit),
                "candidate/bias": ([n], _const_init(cand_bias)),
            },
            x.dtype,
        )
        gates = _nn.sigmoid(_linear([x, state], v["gates/kernel"], v["gates/bias"]))
        r, u = _manip.split(gates, 2, axis=1)
        c = self._activation(_linear([x, r * state], v["candidate/kernel"], v["candidate/bias"]))
        new_h = u * state + (1 - u) * c
        return new_h, new_h


def _const_init(v: Any) -> Any:
    if isinstance(v, (int, float)):
        from .initializers import constant_initializer

        return constant_initializer(float(v))
    return v


class MultiRNNCell(RNNCell):
    """Cells stacked: each one's output is the next one's input; the state is a tuple."""

    _default_name = "multi_rnn_cell"

    def __init__(self, cells: list, state_is_tuple: bool = True):
        super().__init__(None)
        if not cells:
            raise ValueError("MultiRNNCell: needs at least one cell")
        if not state_is_tuple:
            raise NotImplementedError("MultiRNNCell: state_is_tuple=False is not supported")
        self._cells = list(cells)

    @property
    def state_size(self) -> tuple:
        return tuple(c.state_size for c in self._cells)

    @property
    def output_size(self) -> int:
        return self._cells[-1].output_size

    def _step(self, x, state):
        if not isinstance(state, tuple) or len(state) != len(self._cells):
            raise ValueError(
                f"MultiRNNCell: expected a tuple of {len(self._cells)} states, got {state!r}"
            )
        out, new = x, []
        with variable_scope(self._name or self._default_name):
            for k, (cell, s) in enumerate(zip(self._cells, state)):
                with variable_scope(f"cell_{k}"):
                    out, ns = cell(out, s)
                new.append(ns)
        return out, tuple(new)


class _Wrapper(RNNCell):
    """A cell around ``cell``: its state (and, unless the wrapper says otherwise, its output
    size) are the wrapped cell's."""

    def __init__(self, cell: RNNCell):
        super().__init__(None)
        self._cell = cell

    @property
    def state_size(self) -> Any:
        return self._cell.state_size

    @property
    def output_size(self) -> int:
        return self._cell.output_size


class DropoutWrapper(_Wrapper):
    """``cell`` with dropout on its inputs, outputs and (non-tuple parts of) its state."""

    def __init__(
        self,
        cell: RNNCell,
        input_keep_prob: Any = 1.0,
        output_keep_prob: Any = 1.0,
        state_keep_prob: Any = 1.0,
        variational_recurrent: bool = False,
        input_size: Any = None,
        dtype: Any = None,
        seed: int | None = None,
    ):
        super().__init__(cell)
        if variational_recurrent:
            raise NotImplementedError("DropoutWrapper: variational_recurrent is not supported")
        for what, p in (("input", input_keep_prob), ("output", output_keep_prob)):
            if isinstance(p, (int, float)) and not 0 < p <= 1:
                raise ValueError(f"DropoutWrapper: {what}_keep_prob must be in (0, 1], got {p}")
        self._keep = (input_keep_prob, output_keep_prob, state_keep_prob)
        self._seed = seed

    def _drop(self, t: Any, keep: Any) -> Any:
        if isinstance(keep, (int, float)) and keep == 1:
            return t
        return _nn.dropout(t, keep_prob=keep, seed=self._seed)

    def _step(self, x, state):
        ik, ok, sk = self._keep
        out, new = self._cell(self._drop(x, ik), state)
        if not (isinstance(sk, (int, float)) and sk == 1):
            flat = _flatten(new)
            new = _pack(new, [self._drop(s, sk) for s in flat])
        return self._drop(out, ok), new


class ResidualWrapper(_Wrapper):
    """``cell`` whose output is added to its input (``residual_fn(inputs, outputs)``, by
    default their sum: the input and output depths must agree)."""

    def __init__(self, cell: RNNCell, residual_fn: Any = None):
        super().__init__(cell)
        self._residual_fn = residual_fn

    def _step(self, x, state):
        out, new = self._cell(x, state)
        if self._residual_fn is not None:
            return self._residual_fn(x, out), new
        if x.shape.dims is not None and out.shape.dims is not None:
            if x.shape.dims[-1] is not None and x.shape.dims[-1] != out.shape.dims[-1]:
                raise ValueError(
                    f"ResidualWrapper: input depth {x.shape.dims[-1]} and output depth "
                    f"{out.shape.dims[-1]} differ"
                )
        return _math.add(x, out), new


class OutputProjectionWrapper(_Wrapper):
    """contrib.rnn's OutputProjectionWrapper: ``cell``'s output projected to ``output_size``
    (a matmul and a bias, then ``activation``), its state as it is. Variables as TF1 names them:
    ``output_projection_wrapper/kernel`` and ``bias`` (zeros), the cell's own under
    ``output_projection_wrapper/``."""

    _default_name = "output_projection_wrapper"

    def __init__(self, cell: RNNCell, output_size: int, activation: Any = None, reuse=None):
        super().__init__(None)
        if int(output_size) < 1:
            raise ValueError(
                f"OutputProjectionWrapper: output_size must be >= 1, got {output_size}"
            )
        self._cell, self._n, self._activation = cell, int(output_size), activation

    @property
    def state_size(self) -> Any:
        return self._cell.state_size

    @property
    def output_size(self) -> int:
        return self._n

    def _step(self, x, state):
        if self._vars is None:  # the cell's variables and ours, under our scope
            with variable_scope(self._default_name):
                out, new = self._cell(x, state)
                self._vars = {
                    "kernel": get_variable("kernel", [out.shape[1], self._n], dtype=out.dtype),
                    "bias": get_variable("bias", [self._n], dtype=out.dtype, initializer="zeros"),
                }
        else:
            out, new = self._cell(x, state)
        y = _linear([out], self._vars["kernel"], self._vars["bias"])
        return (y if self._activation is None else self._activation(y)), new


class InputProjectionWrapper(_Wrapper):
    """contrib.rnn's InputProjectionWrapper: the inputs projected to ``num_proj`` (a matmul
    and a bias, then ``activation``) before ``cell`` (variables
    ``input_projection_wrapper/kernel`` and ``bias``)."""

    _default_name = "input_projection_wrapper"

    def __init__(
        self, cell: RNNCell, num_proj: int, activation: Any = None, input_size=None, reuse=None
    ):
        super().__init__(cell)
        if int(num_proj) < 1:
            raise ValueError(f"InputProjectionWrapper: num_proj must be >= 1, got {num_proj}")
        self._n, self._activation = int(num_proj), activation

    def _step(self, x, state):
        v = self._variables(
            {"kernel": ([x.shape[1], self._n], None), "bias": ([self._n], "zeros")}, x.dtype
        )
        p = _linear([x], v["kernel"], v["bias"])
        return self._cell(p if self._activation is None else self._activation(p), state)


def LSTMBlockCell(  # noqa: N802 - TF's class name
    num_units: int,
    forget_bias: float = 1.0,
    cell_clip: float | None = None,
    use_peephole: bool = False,
    reuse: Any = None,
    dtype: Any = None,
    name: str = "lstm_cell",
) -> RNNCell:
    """contrib.rnn's LSTMBlockCell (a fused kernel in TF): the same LSTM (gates i, j, f, o,
    ``forget_bias`` added to f, variables ``lstm_cell/kernel`` and ``bias``) as BasicLSTMCell,
    or LSTMCell with peepholes or a cell clip."""
    if use_peephole or cell_clip is not None:
        return LSTMCell(
            num_units, use_peepholes=use_peephole, cell_clip=cell_clip,
            forget_bias=forget_bias, reuse=reuse, name=name, dtype=dtype,
        )  # fmt: skip
    return BasicLSTMCell(num_units, forget_bias=forget_bias, reuse=reuse, name=name, dtype=dtype)


def GRUBlockCell(
    num_units: int, cell_size: Any = None, name: str = "gru_cell", **kw: Any
) -> RNNCell:  # noqa: N802
    """contrib.rnn's GRUBlockCell: the GRU of GRUCell (variables under ``gru_cell``)."""
    return GRUCell(int(num_units if cell_size is None else cell_size), name=name, **kw)


# ---- WP7: contrib.rnn's LayerNormBasicLSTMCell ---------------------------------------------------


class LayerNormBasicLSTMCell(RNNCell):
    """TF1's ``tf.contrib.rnn.LayerNormBasicLSTMCell``: a BasicLSTMCell whose four gate
    pre-activations and new cell state are each layer-normalized (over the units, epsilon
    1e-12) with their own ``gamma`` (init ``norm_gain``) and ``beta`` (init ``norm_shift``)
    under the scopes ``input``, ``transform``, ``forget``, ``output`` and ``state``; no bias
    when ``layer_norm`` (then ``bias``); recurrent dropout of the candidate with
    ``dropout_keep_prob``."""

    _default_name = "layer_norm_basic_lstm_cell"
    _NORMS = ("input", "transform", "forget", "output", "state")

    def __init__(
        self,
        num_units: int,
        forget_bias: float = 1.0,
        input_size: Any = None,
        activation: Any = None,
        layer_norm: bool = True,
        norm_gain: float = 1.0,
        norm_shift: float = 0.0,
        dropout_keep_prob: Any = 1.0,
        dropout_prob_seed: int | None = None,
        reuse: Any = None,
    ):
        super().__init__(None, None)
        self._n = int(num_units)
        self._forget_bias = float(forget_bias)
        self._activation = _act(activation)
        self._layer_norm = bool(layer_norm)
        self._gain, self._shift = float(norm_gain), float(norm_shift)
        self._keep_prob = dropout_keep_prob
        self._seed = dropout_prob_seed

    @property
    def state_size(self) -> LSTMStateTuple:
        return LSTMStateTuple(self._n, self._n)

    @property
    def output_size(self) -> int:
        return self._n

    def _make_vars(self, d: int, dtype: Any) -> dict:
        from .initializers import Constant

        if self._vars is None:
            n, v = self._n, {}
            with variable_scope(self._default_name):
                v["kernel"] = get_variable("kernel", [d + n, 4 * n], dtype=dtype)
                if not self._layer_norm:
                    v["bias"] = get_variable("bias", [4 * n], dtype=dtype, initializer="zeros")
                else:
                    for s in self._NORMS:
                        with variable_scope(s):
                            v[s] = (
                                get_variable("gamma", [n], dtype, Constant(self._gain, dtype)),
                                get_variable("beta", [n], dtype, Constant(self._shift, dtype)),
                            )
            self._vars = v
        return self._vars

    def _norm(self, x: Tensor, which: str) -> Tensor:
        gamma, beta = self._vars[which]
        mean, var = _nn.moments(x, [1], keep_dims=True)
        return (x - mean) * _math.rsqrt(var + 1e-12) * gamma + beta

    def _step(self, x, state):
        c, h = state
        v = self._make_vars(x.shape[1], x.dtype)
        z = _math.matmul(_manip.concat([x, h], 1), v["kernel"])
        if not self._layer_norm:
            z = _nn.bias_add(z, v["bias"])
        i, j, f, o = _manip.split(z, 4, axis=1)
        if self._layer_norm:
            i, j = self._norm(i, "input"), self._norm(j, "transform")
            f, o = self._norm(f, "forget"), self._norm(o, "output")
        g = self._activation(j)
        kp = self._keep_prob
        if not isinstance(kp, (int, float)) or kp < 1:
            g = _nn.dropout(g, keep_prob=kp, seed=self._seed)
        sig = _nn.sigmoid
        new_c = c * sig(f + self._forget_bias) + sig(i) * g
        if self._layer_norm:
            new_c = self._norm(new_c, "state")
        new_h = self._activation(new_c) * sig(o)
        return new_h, LSTMStateTuple(new_c, new_h)
