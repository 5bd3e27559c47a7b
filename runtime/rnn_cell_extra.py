"""More of ``tf.contrib.rnn``: ``EmbeddingWrapper``, ``DeviceWrapper``, ``HighwayWrapper``,
``NASCell``, ``LSTMBlockFusedCell`` and the stacked bidirectional RNNs, with TF 1.15's formulas
and variable names.

* ``EmbeddingWrapper``: integer inputs ``[batch]`` (or ``[batch, 1]``) looked up in
  ``embedding_wrapper/embedding`` (uniform in +-sqrt(3) unless an initializer is given) before
  the wrapped cell.
* ``HighwayWrapper``: ``out = x c + cell_out t`` with the carry gate ``c = sigmoid(x carry_w +
  carry_b)`` (``carry_b`` initialised to ``carry_bias_init``) and ``t = 1 - c``, or with
  ``couple_carry_transform_gates=False`` its own gate (``transform_w``, ``transform_b``
  initialised to ``-carry_bias_init``); the variables in the caller's scope.
* ``NASCell``: the recurrent cell found by neural architecture search (Zoph and Le 2017): eight
  branches of ``x W + h R`` through sigmoid/relu/tanh, combined in three layers; variables
  ``nas_cell/kernel``, ``recurrent_kernel``, ``bias`` (with ``use_bias``), ``projection_weights``.
* ``LSTMBlockFusedCell``: an LSTM over a whole time-major sequence ``[time, batch, depth]`` in one
  call (BasicLSTMCell's gates, variables ``lstm_block_fused_cell/kernel`` and ``bias``).
"""

from __future__ import annotations

import math
from typing import Any

from . import dtypes as _dt
from .graph import Tensor, device
from .initializers import Constant, RandomUniform
from .ops import array as _array
from .ops import manip as _manip
from .ops import math as _math
from .ops import nn as _nn
from .registry import convert_to_tensor
from .rnn import bidirectional_dynamic_rnn, dynamic_rnn, static_bidirectional_rnn
from .rnn_cell import BasicLSTMCell, LSTMStateTuple, RNNCell, _linear, _Wrapper
from .variable_scope import get_variable, get_variable_scope, variable_scope


class EmbeddingWrapper(_Wrapper):
    """``cell`` fed with the embeddings of integer symbol ids."""

    _default_name = "embedding_wrapper"

    def __init__(
        self,
        cell: RNNCell,
        embedding_classes: int,
        embedding_size: int,
        initializer: Any = None,
        reuse: Any = None,
    ):
        super().__init__(cell)
        if int(embedding_classes) <= 0 or int(embedding_size) <= 0:
            raise ValueError(
                f"EmbeddingWrapper: both embedding_classes and embedding_size must be > 0, got "
                f"{embedding_classes} and {embedding_size}"
            )
        self._classes, self._size = int(embedding_classes), int(embedding_size)
        self._initializer = initializer

    def _zero_state_like(self, x: Tensor, dtype: Any) -> Any:
        return self._cell.zero_state(_array.shape(x)[0], dtype)

    def __call__(self, inputs: Any, state: Any, scope: Any = None) -> tuple:
        ids = convert_to_tensor(inputs)
        if not ids.dtype.is_integer:
            raise TypeError(f"EmbeddingWrapper: inputs must be integer ids, got {ids.dtype.name}")
        if self._vars is None:
            with variable_scope(scope or self._default_name):
                init = self._initializer or get_variable_scope().initializer
                if init is None:
                    init = RandomUniform(-math.sqrt(3), math.sqrt(3))
                dtype = _first_dtype(state)
                self._vars = {
                    "embedding": get_variable(
                        "embedding", [self._classes, self._size], dtype=dtype, initializer=init
                    )
                }
                return self._cell(self._embed(ids), state)
        return self._cell(self._embed(ids), state)

    def _embed(self, ids: Tensor) -> Tensor:
        return _manip.gather(self._vars["embedding"], _array.reshape(ids, [-1]))


def _first_dtype(state: Any) -> Any:
    from .nest import _flatten

    for s in _flatten(state):
        if hasattr(s, "dtype"):
            return s.dtype
    return _dt.float32


class DeviceWrapper(_Wrapper):
    """``cell`` with its ops placed on ``device``."""

    def __init__(self, cell: RNNCell, device: str):
        super().__init__(cell)
        self._device = device

    def zero_state(self, batch_size: Any, dtype: Any) -> Any:
        with device(self._device):
            return self._cell.zero_state(batch_size, dtype)

    def _step(self, x, state):
        with device(self._device):
            return self._cell(x, state)


class HighwayWrapper(_Wrapper):
    """``cell`` with a highway connection from its input to its output (depths must agree)."""

    def __init__(
        self,
        cell: RNNCell,
        couple_carry_transform_gates: bool = True,
        carry_bias_init: float = 1.0,
    ):
        super().__init__(cell)
        self._couple = couple_carry_transform_gates
        self._carry_bias_init = float(carry_bias_init)

    def _step(self, x, state):
        out, new = self._cell(x, state)
        d = x.shape[1]
        if out.shape.dims is not None and out.shape[1] not in (None, d):
            raise ValueError(
                f"HighwayWrapper: input depth {d} and the cell's output depth {out.shape[1]} "
                "must agree"
            )
        if self._vars is None:  # in the caller's scope, as TF makes them
            b = self._carry_bias_init
            self._vars = {
                "carry_w": get_variable("carry_w", [d, d], dtype=x.dtype),
                "carry_b": get_variable("carry_b", [d], dtype=x.dtype, initializer=Constant(b)),
            }
            if not self._couple:
                self._vars["transform_w"] = get_variable("transform_w", [d, d], dtype=x.dtype)
                self._vars["transform_b"] = get_variable(
                    "transform_b", [d], dtype=x.dtype, initializer=Constant(-b)
                )
        v = self._vars
        carry = _nn.sigmoid(_linear([x], v["carry_w"], v["carry_b"]))
        if self._couple:
            transform = 1 - carry
        else:
            transform = _nn.sigmoid(_linear([x], v["transform_w"], v["transform_b"]))
        return x * carry + out * transform, new


class NASCell(RNNCell):
    """Zoph and Le's NAS recurrent cell (an LSTM-like state ``(c, h)``; ``num_proj`` projects
    ``h``)."""

    _default_name = "nas_cell"

    def __init__(
        self, num_units: int, num_proj: Any = None, use_bias: bool = False, reuse=None, **kw
    ):
        super().__init__(kw.get("name"), kw.get("dtype"))
        self._n = int(num_units)
        self._proj = None if num_proj is None else int(num_proj)
        self._use_bias = use_bias

    @property
    def state_size(self) -> LSTMStateTuple:
        return LSTMStateTuple(self._n, self._proj or self._n)

    @property
    def output_size(self) -> int:
        return self._proj or self._n

    def _step(self, x, state):
        if not isinstance(state, tuple) or len(state) != 2:
            raise TypeError(
                f"NASCell: state must be an LSTMStateTuple (c, h), got {type(state).__name__} "
                f"{getattr(state, 'name', '')}"
            )
        c_prev, m_prev = state
        n, d, p = self._n, x.shape[1], self._proj or self._n
        specs: dict = {"recurrent_kernel": ([p, 8 * n], None), "kernel": ([d, 8 * n], None)}
        if self._use_bias:
            specs["bias"] = ([8 * n], "zeros")
        if self._proj is not None:
            specs["projection_weights"] = ([n, self._proj], None)
        v = self._variables(specs, x.dtype)
        m = _math.matmul(m_prev, v["recurrent_kernel"])
        if self._use_bias:
            m = _nn.bias_add(m, v["bias"])
        xs = _manip.split(_math.matmul(x, v["kernel"]), 8, axis=1)
        ms = _manip.split(m, 8, axis=1)
        sig, tanh, relu = _nn.sigmoid, _nn.tanh, _nn.relu
        l1 = [
            sig(xs[0] + ms[0]),
            relu(xs[1] + ms[1]),
            sig(xs[2] + ms[2]),
            relu(xs[3] * ms[3]),
            tanh(xs[4] + ms[4]),
            sig(xs[5] + ms[5]),
            tanh(xs[6] + ms[6]),
            sig(xs[7] + ms[7]),
        ]
        l2_0 = tanh(tanh(l1[0] * l1[1]) + c_prev)  # the cell enters here
        l2_1 = tanh(l1[2] + l1[3])
        l2_2 = tanh(l1[4] * l1[5])
        l2_3 = sig(l1[6] + l1[7])
        new_c = l2_0 * l2_1
        new_m = tanh(new_c * tanh(l2_2 + l2_3))
        if self._proj is not None:
            new_m = _math.matmul(new_m, v["projection_weights"])
        return new_m, LSTMStateTuple(new_c, new_m)


class LSTMBlockFusedCell:
    """An LSTM run over a whole time-major sequence: ``cell(inputs [time, batch, depth],
    initial_state=None, dtype=None, sequence_length=None)`` -> ``(outputs [time, batch,
    num_units], LSTMStateTuple(c, h))``; past a row's length outputs are zero and the state is
    held."""

    def __init__(
        self,
        num_units: int,
        forget_bias: float = 1.0,
        cell_clip: Any = None,
        use_peephole: bool = False,
        reuse: Any = None,
        dtype: Any = None,
        name: str = "lstm_block_fused_cell",
    ):
        if use_peephole or cell_clip not in (None, -1):
            raise NotImplementedError(
                "LSTMBlockFusedCell: use_peephole and cell_clip are not supported"
            )
        self._n, self._name = int(num_units), name
        self._cell = BasicLSTMCell(num_units, forget_bias=forget_bias, name=name, dtype=dtype)

    @property
    def num_units(self) -> int:
        return self._n

    def __call__(
        self,
        inputs: Any,
        initial_state: Any = None,
        dtype: Any = None,
        sequence_length: Any = None,
        scope: Any = None,
    ) -> tuple:
        x = convert_to_tensor(inputs)
        if x.shape.ndims != 3:
            raise ValueError(
                f"LSTMBlockFusedCell: inputs must be [time, batch, depth], got {x.shape}"
            )
        if initial_state is not None:
            initial_state = LSTMStateTuple(*initial_state)
        elif dtype is None:
            dtype = x.dtype
        with variable_scope(scope) if scope is not None else _nullcontext():
            out, state = dynamic_rnn(
                self._cell,
                x,
                sequence_length=sequence_length,
                initial_state=initial_state,
                dtype=dtype,
                time_major=True,
                scope=get_variable_scope(),
            )
        return out, state


class _nullcontext:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _stacked(kind: str, cells_fw, cells_bw, inputs, states_fw, states_bw, scope, run) -> tuple:
    if not cells_fw or not cells_bw:
        raise ValueError(f"{kind}: needs at least one forward and one backward cell")
    if len(cells_fw) != len(cells_bw):
        raise ValueError(
            f"{kind}: forward and backward cells must be as many, got {len(cells_fw)} and "
            f"{len(cells_bw)}"
        )
    for what, states, cells in (("fw", states_fw, cells_fw), ("bw", states_bw, cells_bw)):
        if states is not None and len(states) != len(cells):
            raise ValueError(f"{kind}: initial_states_{what} must have one state per cell")
    finals_fw, finals_bw = [], []
    layer = inputs
    with variable_scope(scope or "stack_bidirectional_rnn"):
        for i, (cf, cb) in enumerate(zip(cells_fw, cells_bw)):
            sf = states_fw[i] if states_fw else None
            sb = states_bw[i] if states_bw else None
            with variable_scope(f"cell_{i}"):
                layer, st_fw, st_bw = run(cf, cb, layer, sf, sb)
            finals_fw.append(st_fw)
            finals_bw.append(st_bw)
    return layer, tuple(finals_fw), tuple(finals_bw)


def stack_bidirectional_rnn(
    cells_fw: list,
    cells_bw: list,
    inputs: list,
    initial_states_fw: Any = None,
    initial_states_bw: Any = None,
    dtype: Any = None,
    sequence_length: Any = None,
    scope: Any = None,
) -> tuple:
    """Bidirectional static RNNs stacked (each layer reads the previous layer's concatenated
    forward and backward outputs): ``(outputs, states_fw, states_bw)``."""

    def run(cf, cb, layer, sf, sb):
        return static_bidirectional_rnn(
            cf,
            cb,
            layer,
            initial_state_fw=sf,
            initial_state_bw=sb,
            sequence_length=sequence_length,
            dtype=dtype,
        )

    return _stacked(
        "stack_bidirectional_rnn",
        cells_fw,
        cells_bw,
        inputs,
        initial_states_fw,
        initial_states_bw,
        scope,
        run,
    )


def stack_bidirectional_dynamic_rnn(
    cells_fw: list,
    cells_bw: list,
    inputs: Any,
    initial_states_fw: Any = None,
    initial_states_bw: Any = None,
    dtype: Any = None,
    sequence_length: Any = None,
    parallel_iterations: Any = None,
    time_major: bool = False,
    scope: Any = None,
    swap_memory: bool = False,
) -> tuple:
    """Bidirectional dynamic RNNs stacked: ``(outputs [.., fw + bw depth], states_fw,
    states_bw)``, variables under ``stack_bidirectional_rnn/cell_<i>/bidirectional_rnn/fw``."""

    def run(cf, cb, layer, sf, sb):
        (out_fw, out_bw), (st_fw, st_bw) = bidirectional_dynamic_rnn(
            cf,
            cb,
            layer,
            sequence_length=sequence_length,
            initial_state_fw=sf,
            initial_state_bw=sb,
            dtype=dtype,
            parallel_iterations=parallel_iterations,
            time_major=time_major,
        )
        return _manip.concat([out_fw, out_bw], 2), st_fw, st_bw

    return _stacked(
        "stack_bidirectional_dynamic_rnn",
        cells_fw,
        cells_bw,
        inputs,
        initial_states_fw,
        initial_states_bw,
        scope,
        run,
    )


#: TF's LayerRNNCell: a cell built on its first call, as every hetbed cell is
LayerRNNCell = RNNCell

__all__ = [
    "DeviceWrapper",
    "EmbeddingWrapper",
    "HighwayWrapper",
    "LSTMBlockFusedCell",
    "LayerRNNCell",
    "NASCell",
    "stack_bidirectional_dynamic_rnn",
    "stack_bidirectional_rnn",
]
