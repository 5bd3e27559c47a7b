"""TF1's ``tf.contrib.seq2seq`` attention: the mechanisms (``LuongAttention``,
``BahdanauAttention`` and their monotonic forms) and ``AttentionWrapper``, a cell that queries
them with its output at every step, as TF 1.15 defines them.

A mechanism holds the memory (``[batch, max_time, depth]``, rows past
``memory_sequence_length`` zeroed) and its keys (the memory through ``memory_layer``, a Dense
without bias, made where the mechanism is constructed: ``memory_layer/kernel``). Called with a
query ``[batch, depth]`` and its previous state it returns the alignments ``[batch, max_time]``
and its next state (the alignments again):

* Luong: ``score = query . keys`` (times a scalar ``attention_g``, initially 1, when ``scale``);
* Bahdanau: ``score = sum(v tanh(keys + query_layer(query)))``; ``normalize`` uses
  ``g v / |v|`` with ``g`` initially ``sqrt(1 / num_units)`` and a bias ``attention_b`` inside
  the tanh;
* masked positions score ``score_mask_value`` (-inf) before ``probability_fn`` (softmax);
* the monotonic forms add a scalar ``attention_score_bias`` and turn the scores into choosing
  probabilities (sigmoid, optional pre-sigmoid noise; ``hard``: score > 0) and those into an
  attention distribution given the previous one (``monotonic_attention``).

``AttentionWrapper`` runs the wrapped cell on ``cell_input_fn(inputs, previous attention)``
(concatenation by default), scores the cell's output with each mechanism, takes the context
(alignments times values) and, with ``attention_layer_size``, the attention
``attention_layer([cell_output, context])`` (a Dense without bias); its output is the attention
(or the cell's output when ``output_attention=False``). Variables as TF names them, under the
wrapper's scope (``attention_wrapper/basic_lstm_cell/kernel``,
``attention_wrapper/luong_attention/attention_g``, ``attention_wrapper/attention_layer/kernel``,
``attention_wrapper/bahdanau_attention/query_layer/kernel``).
"""

from __future__ import annotations

import collections
import functools
import math
from typing import Any

import numpy as np

import hetbed as _hb
from hetbed.runtime import dtypes as _dt
from hetbed.runtime.rnn_cell import RNNCell


class AttentionMechanism:
    """Base type of the attention mechanisms (what ``AttentionWrapper`` accepts)."""


def _dim(t: Any, axis: int) -> Any:
    """``t``'s size along ``axis``: the static value when known, else a scalar tensor."""
    d = t.shape.dims[axis] if t.shape.dims is not None else None
    return d if d is not None else _hb.shape(t)[axis]


def _zeros(batch: Any, width: Any, dtype: Any) -> Any:
    if isinstance(batch, int) and isinstance(width, int):
        return _hb.zeros([batch, width], dtype=dtype)
    return _hb.zeros(_hb.stack([batch, width]), dtype=dtype)


def _prepare_memory(memory: Any, lengths: Any, check_inner_dims_defined: bool) -> Any:
    """``memory`` as tensors, rows at or past ``lengths[b]`` set to zero."""

    def check(m: Any) -> Any:
        m = _hb.convert_to_tensor(m, name="memory")
        if m.shape.ndims is not None and m.shape.ndims < 2:
            raise ValueError(
                f"attention memory {m.name} must be [batch, max_time, ...], got {m.shape}"
            )
        if check_inner_dims_defined and (
            m.shape.dims is None or any(d is None for d in m.shape.dims[2:])
        ):
            raise ValueError(
                f"Expected memory {m.name} to have fully defined inner dims, but saw shape: "
                f"{m.shape}"
            )
        return m

    memory = _hb.nest.map_structure(check, memory)
    if lengths is None:
        return memory
    lengths = _hb.convert_to_tensor(lengths, name="memory_sequence_length")
    first = _hb.nest.flatten(memory)[0]
    mask = _hb.sequence_mask(lengths, maxlen=_hb.shape(first)[1], dtype=first.dtype)

    def apply(m: Any) -> Any:
        b_mem, b_len = m.shape.dims[0] if m.shape.dims else None, lengths.shape.dims[0]
        if b_mem is not None and b_len is not None and b_mem != b_len:
            raise ValueError(
                f"memory_sequence_length and memory tensor batch sizes do not match: "
                f"{lengths.name} has {b_len}, {m.name} has {b_mem}"
            )
        mm = mask
        for _ in range((m.shape.ndims or 2) - 2):
            mm = _hb.expand_dims(mm, -1)
        return m * mm

    return _hb.nest.map_structure(apply, memory)


def _maybe_mask_score(score: Any, lengths: Any, mask_value: Any) -> Any:
    if lengths is None:
        return score
    check = _hb.assert_positive(
        lengths, message="All values in memory_sequence_length must greater than zero."
    )
    with _hb.control_dependencies([check]):
        keep = _hb.sequence_mask(lengths, maxlen=_hb.shape(score)[1])
        return _hb.where(keep, score, mask_value * _hb.ones_like(score))


class _BaseAttentionMechanism(AttentionMechanism):
    """The memory and its keys, the masked probability function, the initial alignments."""

    _scope_name = "attention"

    def __init__(
        self,
        query_layer: Any,
        memory: Any,
        probability_fn: Any,
        memory_sequence_length: Any = None,
        memory_layer: Any = None,
        check_inner_dims_defined: bool = True,
        score_mask_value: Any = None,
        name: Any = None,
    ):
        for what, layer in (("query_layer", query_layer), ("memory_layer", memory_layer)):
            if layer is not None and not isinstance(layer, _hb.layers.Layer):
                raise TypeError(f"{what} is not a Layer: {type(layer).__name__}")
        if not callable(probability_fn):
            raise TypeError(
                f"probability_fn must be callable, saw type: {type(probability_fn).__name__}"
            )
        self._query_layer, self._memory_layer = query_layer, memory_layer
        self.dtype = _dt.as_dtype(getattr(memory_layer, "dtype", None) or _dt.float32)
        if score_mask_value is None:
            score_mask_value = self.dtype.np.type(-np.inf)
        lengths = memory_sequence_length
        if lengths is not None:
            lengths = _hb.convert_to_tensor(lengths, name="memory_sequence_length")
        self._probability_fn = lambda score, prev: probability_fn(
            _maybe_mask_score(score, lengths, score_mask_value), prev
        )
        with _hb.name_scope(name or "BaseAttentionMechanismInit"):
            self._values = _prepare_memory(memory, lengths, check_inner_dims_defined)
            self._keys = memory_layer(self._values) if memory_layer is not None else self._values
        self._batch_size = _dim(self._keys, 0)
        self._alignments_size = _dim(self._keys, 1)
        self._vars: dict | None = None  # the score's variables, made on the first call

    memory_layer = property(lambda self: self._memory_layer)
    query_layer = property(lambda self: self._query_layer)
    values = property(lambda self: self._values)
    keys = property(lambda self: self._keys)
    batch_size = property(lambda self: self._batch_size)
    alignments_size = property(lambda self: self._alignments_size)
    state_size = property(lambda self: self._alignments_size)

    def initial_alignments(self, batch_size: Any, dtype: Any) -> Any:
        """Zeros ``[batch_size, max_time]``."""
        return _zeros(batch_size, self._alignments_size, dtype)

    def initial_state(self, batch_size: Any, dtype: Any) -> Any:
        return self.initial_alignments(batch_size, dtype)

    def _score_vars(self, make: Any) -> dict:
        """This mechanism's variables: made by ``make()`` on the first call, in a scope named as
        TF names it (``luong_attention``, made unique among the wrapper's mechanisms)."""
        if self._vars is None:
            with _hb.variable_scope(None, default_name=self._scope_name):
                self._vars = make()
        return self._vars

    def __call__(self, query: Any, state: Any) -> tuple:
        score = self._score(_hb.convert_to_tensor(query))
        alignments = self._probability_fn(score, state)
        return alignments, alignments


def _luong_score(query: Any, keys: Any, g: Any) -> Any:
    depth, units = query.shape.dims[-1], keys.shape.dims[-1]
    if depth != units:
        raise ValueError(
            f"Incompatible or unknown inner dimensions between query and keys.  Query "
            f"({query.name}) has units: {depth}.  Keys ({keys.name}) have units: {units}.  "
            f"Perhaps you need to set num_units to the keys' dimension ({units})?"
        )
    score = _hb.squeeze(_hb.matmul(_hb.expand_dims(query, 1), keys, transpose_b=True), [1])
    return score if g is None else g * score


def _bahdanau_score(query: Any, keys: Any, v: Any, g: Any, b: Any) -> Any:
    q = _hb.expand_dims(query, 1)
    if g is None:
        return _hb.reduce_sum(v * _hb.tanh(keys + q), [2])
    normed_v = g * v * _hb.rsqrt(_hb.reduce_sum(_hb.square(v)))
    return _hb.reduce_sum(normed_v * _hb.tanh(keys + q + b), [2])


class LuongAttention(_BaseAttentionMechanism):
    """Multiplicative attention (Luong et al. 2015); ``scale`` multiplies the score by a
    learned scalar ``attention_g``. ``num_units`` must equal the query's depth."""

    _scope_name = "luong_attention"

    def __init__(
        self,
        num_units: int,
        memory: Any,
        memory_sequence_length: Any = None,
        scale: bool = False,
        probability_fn: Any = None,
        score_mask_value: Any = None,
        dtype: Any = None,
        custom_key_value_fn: Any = None,
        name: str = "LuongAttention",
    ):
        fn = probability_fn or _hb.nn.softmax
        super().__init__(
            query_layer=None,
            memory_layer=_hb.layers.Dense(
                num_units, name="memory_layer", use_bias=False, dtype=dtype or _dt.float32
            ),
            memory=memory,
            probability_fn=lambda score, _prev: fn(score),
            memory_sequence_length=memory_sequence_length,
            score_mask_value=score_mask_value,
            name=name,
        )
        self._num_units, self._scale, self._name = num_units, scale, name

    def _score(self, query: Any) -> Any:
        def make() -> dict:
            g = None
            if self._scale:
                g = _hb.get_variable(
                    "attention_g", dtype=query.dtype, shape=(), initializer=_hb.ones_initializer()
                )
            return {"g": g}

        return _luong_score(query, self._keys, self._score_vars(make)["g"])


class BahdanauAttention(_BaseAttentionMechanism):
    """Additive attention (Bahdanau et al. 2015); ``normalize`` is its weight-normalised form
    (Salimans and Kingma 2016)."""

    _scope_name = "bahdanau_attention"

    def __init__(
        self,
        num_units: int,
        memory: Any,
        memory_sequence_length: Any = None,
        normalize: bool = False,
        probability_fn: Any = None,
        score_mask_value: Any = None,
        dtype: Any = None,
        custom_key_value_fn: Any = None,
        name: str = "BahdanauAttention",
    ):
        fn = probability_fn or _hb.nn.softmax
        dt = dtype or _dt.float32
        super().__init__(
            query_layer=_hb.layers.Dense(num_units, name="query_layer", use_bias=False, dtype=dt),
            memory_layer=_hb.layers.Dense(num_units, name="memory_layer", use_bias=False, dtype=dt),
            memory=memory,
            probability_fn=lambda score, _prev: fn(score),
            memory_sequence_length=memory_sequence_length,
            score_mask_value=score_mask_value,
            name=name,
        )
        self._num_units, self._normalize, self._name = num_units, normalize, name

    def _bahdanau_vars(self, query: Any) -> tuple:
        """The processed query and the score's variables (TF makes ``query_layer`` and the
        score's variables in one scope)."""
        if self._vars is None:
            with _hb.variable_scope(None, default_name=self._scope_name):
                processed = self._query_layer(query)
                self._vars = self._make_vars(processed.dtype)
            return processed, self._vars
        return self._query_layer(query), self._vars

    def _make_vars(self, dtype: Any) -> dict:
        n = _dim(self._keys, 2)
        out = {"v": _hb.get_variable("attention_v", [n], dtype=dtype), "g": None, "b": None}
        if self._normalize:
            out["g"] = _hb.get_variable(
                "attention_g",
                dtype=dtype,
                shape=(),
                initializer=_hb.constant_initializer(math.sqrt(1.0 / self._num_units)),
            )
            out["b"] = _hb.get_variable(
                "attention_b", [n], dtype=dtype, initializer=_hb.zeros_initializer()
            )
        return out

    def _score(self, query: Any) -> Any:
        processed, v = self._bahdanau_vars(query)
        return _bahdanau_score(processed, self._keys, v["v"], v["g"], v["b"])


# ---- monotonic attention (Raffel et al. 2017) --------------------------------------------------


def safe_cumprod(x: Any, *args: Any, **kwargs: Any) -> Any:
    """``cumprod`` computed as ``exp(cumsum(log(x)))`` on ``x`` clipped to [tiny, 1]."""
    with _hb.name_scope("SafeCumprod"):
        x = _hb.convert_to_tensor(x, name="x")
        tiny = np.finfo(x.dtype.np).tiny
        clipped = _hb.minimum(_hb.maximum(x, x.dtype.np.type(tiny)), x.dtype.np.type(1))
        return _hb.exp(_hb.cumsum(_hb.log(clipped), *args, **kwargs))


def monotonic_attention(p_choose_i: Any, previous_attention: Any, mode: str) -> Any:
    """The attention distribution implied by choosing probabilities ``p_choose_i`` and the
    previous step's distribution: ``recursive`` (a scan, exact), ``parallel`` (closed form with
    cumulative products) or ``hard`` (0/1 probabilities)."""
    p = _hb.convert_to_tensor(p_choose_i, name="p_choose_i")
    prev = _hb.convert_to_tensor(previous_attention, name="previous_attention")
    if mode == "recursive":
        batch = _dim(p, 0)
        ones = _hb.ones(_hb.stack([batch, 1]), dtype=p.dtype)
        shifted = _hb.concat([ones, 1 - p[:, :-1]], 1)
        q = _hb.scan(
            lambda acc, yz: yz[0] * acc + yz[1],
            [_hb.transpose(shifted), _hb.transpose(prev)],
            _hb.zeros(_hb.stack([batch]), dtype=p.dtype),
        )
        return p * _hb.transpose(q)
    if mode == "parallel":
        cp = safe_cumprod(1 - p, axis=1, exclusive=True)
        denom = _hb.minimum(_hb.maximum(cp, p.dtype.np.type(1e-10)), p.dtype.np.type(1))
        return p * cp * _hb.cumsum(prev / denom, axis=1)
    if mode == "hard":
        p = p * _hb.cumsum(prev, axis=1)
        return p * _hb.cumprod(1 - p, axis=1, exclusive=True)
    raise ValueError("mode must be 'recursive', 'parallel', or 'hard'.")


def _monotonic_probability_fn(score, previous, sigmoid_noise, mode, seed=None):
    if sigmoid_noise > 0:
        score = score + sigmoid_noise * _hb.random_normal(
            _hb.shape(score), dtype=score.dtype, seed=seed
        )
    if mode == "hard":
        p = _hb.cast(score > 0, score.dtype)
    else:
        p = _hb.sigmoid(score)
    return monotonic_attention(p, previous, mode)


class _MonotonicMixin:
    """Monotonic mechanisms start from all attention on the first memory entry and add a
    learned scalar bias to the score."""

    def _monotonic(self, lengths, score_mask_value, sigmoid_noise, seed, mode, bias_init):
        """The monotonic probability function (given the previous alignments) on the masked
        score, and the score bias's initial value."""
        fn = functools.partial(
            _monotonic_probability_fn, sigmoid_noise=sigmoid_noise, mode=mode, seed=seed
        )
        mask = score_mask_value if score_mask_value is not None else self.dtype.np.type(-np.inf)
        self._probability_fn = lambda score, prev: fn(_maybe_mask_score(score, lengths, mask), prev)
        self._score_bias_init = bias_init

    def initial_alignments(self, batch_size: Any, dtype: Any) -> Any:
        n = batch_size if isinstance(batch_size, int) else _hb.stack([batch_size])
        first = _hb.zeros([n] if isinstance(n, int) else n, dtype=_dt.int32)
        return _hb.one_hot(first, self._alignments_size, dtype=dtype)


class BahdanauMonotonicAttention(_MonotonicMixin, BahdanauAttention):
    """Bahdanau scores, monotonic alignments."""

    _scope_name = "bahdanau_monotonic_attention"

    def __init__(
        self,
        num_units: int,
        memory: Any,
        memory_sequence_length: Any = None,
        normalize: bool = False,
        score_mask_value: Any = None,
        sigmoid_noise: float = 0.0,
        sigmoid_noise_seed: Any = None,
        score_bias_init: float = 0.0,
        mode: str = "parallel",
        dtype: Any = None,
        name: str = "BahdanauMonotonicAttention",
    ):
        super().__init__(
            num_units,
            memory,
            memory_sequence_length,
            normalize,
            None,
            score_mask_value,
            dtype,
            name=name,
        )
        self._monotonic(
            memory_sequence_length,
            score_mask_value,
            sigmoid_noise,
            sigmoid_noise_seed,
            mode,
            score_bias_init,
        )

    def _make_vars(self, dtype: Any) -> dict:
        out = super()._make_vars(dtype)
        out["bias"] = _hb.get_variable(
            "attention_score_bias",
            dtype=dtype,
            shape=(),
            initializer=_hb.constant_initializer(float(self._score_bias_init)),
        )
        return out

    def _score(self, query: Any) -> Any:
        score = super()._score(query)  # makes the variables, the bias among them
        return score + self._vars["bias"]


class LuongMonotonicAttention(_MonotonicMixin, LuongAttention):
    """Luong scores, monotonic alignments."""

    _scope_name = "luong_monotonic_attention"

    def __init__(
        self,
        num_units: int,
        memory: Any,
        memory_sequence_length: Any = None,
        scale: bool = False,
        score_mask_value: Any = None,
        sigmoid_noise: float = 0.0,
        sigmoid_noise_seed: Any = None,
        score_bias_init: float = 0.0,
        mode: str = "parallel",
        dtype: Any = None,
        name: str = "LuongMonotonicAttention",
    ):
        super().__init__(
            num_units,
            memory,
            memory_sequence_length,
            scale,
            None,
            score_mask_value,
            dtype,
            name=name,
        )
        self._monotonic(
            memory_sequence_length,
            score_mask_value,
            sigmoid_noise,
            sigmoid_noise_seed,
            mode,
            score_bias_init,
        )

    def _score(self, query: Any) -> Any:
        def make() -> dict:
            g = None
            if self._scale:
                g = _hb.get_variable(
                    "attention_g", dtype=query.dtype, shape=(), initializer=_hb.ones_initializer()
                )
            bias = _hb.get_variable(
                "attention_score_bias",
                dtype=query.dtype,
                shape=(),
                initializer=_hb.constant_initializer(float(self._score_bias_init)),
            )
            return {"g": g, "bias": bias}

        v = self._score_vars(make)
        return _luong_score(query, self._keys, v["g"]) + v["bias"]


# ---- the wrapper ------------------------------------------------------------------------------


class AttentionWrapperState(
    collections.namedtuple(
        "AttentionWrapperState",
        ("cell_state", "attention", "time", "alignments", "alignment_history", "attention_state"),
    )
):
    """The wrapper's state: the cell's state, the last attention, the step, the alignments,
    their history (TensorArrays, when asked for) and the mechanisms' states."""

    def clone(self, **kwargs: Any) -> AttentionWrapperState:
        """A copy with the given fields replaced (``state.clone(cell_state=encoder_state)``)."""
        return self._replace(**kwargs)


def hardmax(logits: Any, name: Any = None) -> Any:
    """One-hot vectors at each row's largest logit."""
    with _hb.name_scope(name or "Hardmax"):
        x = _hb.convert_to_tensor(logits, name="logits")
        return _hb.one_hot(_hb.argmax(x, -1), _dim(x, -1), dtype=x.dtype)


class AttentionWrapper(RNNCell):
    """A cell with attention over one or several mechanisms' memories (see the module's
    docstring). With ``BeamSearchDecoder`` the memory must be tiled with ``tile_batch`` and
    ``zero_state`` asked for ``batch_size * beam_width``."""

    _default_name = "attention_wrapper"

    def __init__(
        self,
        cell: Any,
        attention_mechanism: Any,
        attention_layer_size: Any = None,
        alignment_history: bool = False,
        cell_input_fn: Any = None,
        output_attention: bool = True,
        initial_cell_state: Any = None,
        name: Any = None,
        attention_layer: Any = None,
        attention_fn: Any = None,
    ):
        super().__init__(name)
        if not hasattr(cell, "zero_state") or not callable(cell):
            raise TypeError(f"cell must be an RNNCell, saw type: {type(cell).__name__}")
        multi = isinstance(attention_mechanism, (list, tuple))
        mechanisms = tuple(attention_mechanism) if multi else (attention_mechanism,)
        for m in mechanisms:
            if not isinstance(m, AttentionMechanism):
                raise TypeError(
                    "attention_mechanism must be an AttentionMechanism or list of multiple "
                    f"AttentionMechanism instances, saw type: {type(m).__name__}"
                )
        if cell_input_fn is None:
            cell_input_fn = lambda inputs, attention: _hb.concat([inputs, attention], -1)  # noqa: E731
        elif not callable(cell_input_fn):
            raise TypeError(
                f"cell_input_fn must be callable, saw type: {type(cell_input_fn).__name__}"
            )
        if attention_layer_size is not None and attention_layer is not None:
            raise ValueError("Only one of attention_layer_size and attention_layer should be set")
        if attention_layer_size is not None:
            sizes = tuple(
                attention_layer_size
                if isinstance(attention_layer_size, (list, tuple))
                else (attention_layer_size,)
            )
            if len(sizes) != len(mechanisms):
                raise ValueError(
                    "If provided, attention_layer_size must contain exactly one integer per "
                    f"attention_mechanism, saw: {len(sizes)} vs {len(mechanisms)}"
                )
            self._attention_layers = tuple(
                _hb.layers.Dense(n, name="attention_layer", use_bias=False, dtype=m.dtype)
                for n, m in zip(sizes, mechanisms)
            )
            self._attention_layer_size = sum(int(n) for n in sizes)
        elif attention_layer is not None:
            layers = tuple(
                attention_layer
                if isinstance(attention_layer, (list, tuple))
                else (attention_layer,)
            )
            if len(layers) != len(mechanisms):
                raise ValueError(
                    "If provided, attention_layer must contain exactly one layer per "
                    f"attention_mechanism, saw: {len(layers)} vs {len(mechanisms)}"
                )
            self._attention_layers = layers
            self._attention_layer_size = sum(int(layer.units) for layer in layers)
        else:
            self._attention_layers = None
            self._attention_layer_size = sum(int(_dim(m.values, -1)) for m in mechanisms)
        self._cell, self._mechanisms, self._is_multi = cell, mechanisms, multi
        self._cell_input_fn = cell_input_fn
        self._output_attention = output_attention
        self._alignment_history = alignment_history
        self._attention_fn = attention_fn or _compute_attention
        self._initial_cell_state = initial_cell_state
        self._built = False

    def _item_or_tuple(self, seq: Any) -> Any:
        t = tuple(seq)
        return t if self._is_multi else t[0]

    @property
    def output_size(self) -> Any:
        return self._attention_layer_size if self._output_attention else self._cell.output_size

    @property
    def state_size(self) -> AttentionWrapperState:
        return AttentionWrapperState(
            cell_state=self._cell.state_size,
            time=_hb.TensorShape([]),
            attention=self._attention_layer_size,
            alignments=self._item_or_tuple(m.alignments_size for m in self._mechanisms),
            attention_state=self._item_or_tuple(m.state_size for m in self._mechanisms),
            alignment_history=self._item_or_tuple(() for _ in self._mechanisms),
        )

    def zero_state(self, batch_size: Any, dtype: Any) -> AttentionWrapperState:
        """Zeros for the attention, the mechanisms' initial alignments, step 0, the cell's zero
        state (or ``initial_cell_state``), empty histories when ``alignment_history``."""
        dt = _dt.as_dtype(dtype)
        with _hb.name_scope(f"{type(self).__name__}ZeroState"):
            static = _static_int(batch_size)
            for m in self._mechanisms:
                if static is not None and isinstance(m.batch_size, int) and m.batch_size != static:
                    raise ValueError(
                        f"When calling zero_state of AttentionWrapper {self._name or 'attention_wrapper'}: "
                        f"Non-matching batch sizes between the memory (encoder output) and the "
                        f"requested batch size ({m.batch_size} vs {static}).  Are you using the "
                        "BeamSearchDecoder?  If so, make sure your encoder output has been tiled "
                        "to beam_width via tf.contrib.seq2seq.tile_batch, and the batch_size= "
                        "argument passed to zero_state is batch_size * beam_width."
                    )
            b = static if static is not None else batch_size
            cell_state = (
                self._initial_cell_state
                if self._initial_cell_state is not None
                else self._cell.zero_state(b, dt)
            )
            return AttentionWrapperState(
                cell_state=cell_state,
                time=_hb.zeros([], dtype=_dt.int32),
                attention=_zeros(b, self._attention_layer_size, dt),
                alignments=self._item_or_tuple(
                    m.initial_alignments(b, dt) for m in self._mechanisms
                ),
                attention_state=self._item_or_tuple(
                    m.initial_state(b, dt) for m in self._mechanisms
                ),
                alignment_history=self._item_or_tuple(
                    _hb.TensorArray(dt, size=0, dynamic_size=True)
                    if self._alignment_history
                    else ()
                    for _ in self._mechanisms
                ),
            )

    def _zero_state_like(self, x: Any, dtype: Any) -> AttentionWrapperState:
        return self.zero_state(_dim(x, 0), dtype)

    def __call__(self, inputs: Any, state: Any, scope: Any = None) -> tuple:
        if not isinstance(state, AttentionWrapperState):
            raise TypeError(
                "Expected state to be instance of AttentionWrapperState. Received type "
                f"{type(state)} instead."
            )
        if self._built:
            return self._attend(inputs, state)
        with _hb.variable_scope(scope or self._name or self._default_name):
            out = self._attend(inputs, state)
        self._built = True
        return out

    def _attend(self, inputs: Any, state: AttentionWrapperState) -> tuple:
        cell_inputs = self._cell_input_fn(inputs, state.attention)
        cell_output, next_cell_state = self._cell(cell_inputs, state.cell_state)
        rows = cell_output.shape.dims[0] if cell_output.shape.dims else None
        for m in self._mechanisms:
            if isinstance(m.batch_size, int) and rows is not None and rows != m.batch_size:
                raise ValueError(
                    f"When applying AttentionWrapper {self._name or self._default_name}: "
                    f"Non-matching batch sizes between the memory (encoder output, "
                    f"{m.batch_size}) and the query (decoder output, {rows}).  Are you using the "
                    "BeamSearchDecoder?  You may need to tile your memory input via the "
                    "tf.contrib.seq2seq.tile_batch function with argument multiple=beam_width."
                )
        if self._is_multi:
            prev_states, prev_hist = state.attention_state, state.alignment_history
        else:
            prev_states, prev_hist = [state.attention_state], [state.alignment_history]
        alignments, attentions, histories, states = [], [], [], []
        for i, m in enumerate(self._mechanisms):
            layer = self._attention_layers[i] if self._attention_layers else None
            attention, align, next_st = self._attention_fn(m, cell_output, prev_states[i], layer)
            hist = prev_hist[i].write(state.time, align) if self._alignment_history else ()
            alignments.append(align)
            histories.append(hist)
            attentions.append(attention)
            states.append(next_st)
        attention = attentions[0] if len(attentions) == 1 else _hb.concat(attentions, 1)
        next_state = AttentionWrapperState(
            time=state.time + 1,
            cell_state=next_cell_state,
            attention=attention,
            alignments=self._item_or_tuple(alignments),
            attention_state=self._item_or_tuple(states),
            alignment_history=self._item_or_tuple(histories),
        )
        return (attention if self._output_attention else cell_output), next_state


def _compute_attention(mechanism: Any, cell_output: Any, state: Any, layer: Any) -> tuple:
    """The attention, the alignments and the mechanism's next state for one mechanism."""
    alignments, next_state = mechanism(cell_output, state=state)
    context = _hb.squeeze(_hb.matmul(_hb.expand_dims(alignments, 1), mechanism.values), [1])
    attention = layer(_hb.concat([cell_output, context], 1)) if layer is not None else context
    return attention, alignments, next_state


def _static_int(x: Any) -> int | None:
    if isinstance(x, (int, np.integer)):
        return int(x)
    return None


__all__ = [
    "AttentionMechanism",
    "AttentionWrapper",
    "AttentionWrapperState",
    "BahdanauAttention",
    "BahdanauMonotonicAttention",
    "LuongAttention",
    "LuongMonotonicAttention",
    "hardmax",
    "monotonic_attention",
    "safe_cumprod",
]
