"""Running recurrent cells (rnn_cell.py) over time, in TF1's shapes (``tf.nn``): ``static_rnn``
over a list of steps, ``dynamic_rnn`` over a time dimension (unrolled when it is known when the
graph is built, a ``while_loop`` when it is known only when it runs), and the bidirectional
forms of both. ``sequence_length`` zeroes outputs past a row's length and carries its state
through; variable names are TF's (``rnn/<cell>/kernel``, ``bidirectional_rnn/fw``, ``/bw``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .graph import Tensor, name_scope
from .ops import array as _array
from .ops import manip as _manip
from .ops import math as _math
from .registry import convert_to_tensor
from .variable_scope import variable_scope

if TYPE_CHECKING:
    from .rnn_cell import RNNCell


def static_rnn(
    cell: RNNCell,
    inputs: list,
    initial_state: Any = None,
    dtype: Any = None,
    sequence_length: Any = None,
    scope: Any = None,
) -> tuple[list, Any]:
    """Run ``cell`` over the list ``inputs`` (one ``[batch, in]`` tensor per step).

    Returns ``(outputs, final_state)``. Give ``initial_state`` or ``dtype`` (zero state). With
    ``sequence_length`` (int ``[batch]``), outputs past a row's length are zeros and its state is
    carried through unchanged, so the final state is the state at each row's last step.
    """
    from .rnn_cell import _flatten, _pack

    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise TypeError("static_rnn: inputs must be a non-empty list of [batch, depth] tensors")
    xs = [convert_to_tensor(x) for x in inputs]
    with variable_scope(scope or "rnn"):
        if initial_state is None:
            if dtype is None:
                raise ValueError("static_rnn: give initial_state or dtype")
            state = cell._zero_state_like(xs[0], dtype)
        else:
            state = initial_state
        lengths = _lengths(sequence_length)
        outputs = []
        for t, x in enumerate(xs):
            out, new = cell(x, state)
            if lengths is not None:
                with name_scope(f"mask_{t}"):
                    out, flat = _masked(out, _flatten(new), _flatten(state), lengths, t)
                    new = _pack(new, flat)
            outputs.append(out)
            state = new
        return outputs, state


def _masked(out: Tensor, new: list, old: list, lengths: Tensor, t: Any) -> tuple:
    """Step ``t`` under ``sequence_length``: zero outputs past a row's length, whose state is
    carried through unchanged."""
    live = _array.cast(_math.greater(lengths, t), out.dtype)[:, None]
    return out * live, [live * n + (1 - live) * s for n, s in zip(new, old)]


def _time_steps(inputs: Any, time_major: bool, what: str) -> tuple[Tensor, int]:
    x = convert_to_tensor(inputs)
    if x.shape.ndims is None or x.shape.ndims < 3:
        raise ValueError(
            f"{what}: inputs must be a [batch, time, depth] tensor ([time, batch, depth] with "
            f"time_major=True), got shape {x.shape} ({x.name})"
        )
    steps = x.shape.dims[0 if time_major else 1]
    return x, None if steps is None else int(steps)


def _lengths(sequence_length: Any) -> Tensor | None:
    """A ``sequence_length`` as the int32 vector TF makes of it (a float one, e.g. a sum of
    ``tf.sign`` over one-hot inputs, is cast as TF casts it)."""
    if sequence_length is None:
        return None
    lengths = convert_to_tensor(sequence_length)
    if lengths.shape.ndims not in (None, 1):
        raise ValueError(
            f"sequence_length must be a vector of one length per batch row, got shape "
            f"{lengths.shape}"
        )
    if lengths.dtype.name != "int32":
        lengths = _array.cast(lengths, "int32")
    return lengths


def dynamic_rnn(
    cell: RNNCell,
    inputs: Any,
    sequence_length: Any = None,
    initial_state: Any = None,
    dtype: Any = None,
    parallel_iterations: Any = None,
    swap_memory: bool = False,
    time_major: bool = False,
    scope: Any = None,
) -> tuple[Tensor, Any]:
    """TF1's ``tf.nn.dynamic_rnn`` for inputs with a static number of time steps: ``(outputs,
    final_state)`` with outputs ``[batch, time, cell.output_size]`` (``[time, batch, ...]`` with
    ``time_major``), computed by unrolling the cell over the steps (``static_rnn``), with the same
    variable names as TF's (``rnn/<cell>/kernel``) and the same ``sequence_length`` semantics:
    zero outputs past a row's length, its state carried through. A time dimension known only when
    the graph runs is gone over by a ``while_loop`` (one iteration per step, the same cell, the
    same names; ``parallel_iterations`` as TF's, 32 by default); ``swap_memory`` is accepted."""
    x, steps = _time_steps(inputs, time_major, "dynamic_rnn")
    if steps is None:
        return _rnn_loop(
            cell, x, sequence_length, initial_state, dtype, time_major, scope, parallel_iterations
        )
    xs = _manip.unstack(x, num=steps, axis=0 if time_major else 1)
    outputs, state = static_rnn(cell, xs, initial_state, dtype, sequence_length, scope or "rnn")
    return _manip.stack(outputs, axis=0 if time_major else 1), state


def static_bidirectional_rnn(
    cell_fw: RNNCell,
    cell_bw: RNNCell,
    inputs: list,
    initial_state_fw: Any = None,
    initial_state_bw: Any = None,
    dtype: Any = None,
    sequence_length: Any = None,
    scope: Any = None,
) -> tuple[list, Any, Any]:
    """TF1's ``static_bidirectional_rnn``: ``(outputs, state_fw, state_bw)`` where each output is
    the forward and backward cells' outputs at that step joined along the depth. The backward
    cell runs ``static_rnn`` over the inputs in reverse order (each row within its own
    ``sequence_length`` when given, by ``reverse_sequence``), its outputs put back in time
    order. Variables under ``bidirectional_rnn/fw`` and ``/bw`` as in TF."""
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise TypeError(
            "static_bidirectional_rnn: inputs must be a non-empty list of [batch, depth] tensors"
        )
    xs = [convert_to_tensor(x) for x in inputs]

    def backwards(seq: list) -> list:
        if sequence_length is None:
            return list(reversed(seq))
        stacked = _manip.stack(seq)
        rev = _manip.reverse_sequence(stacked, sequence_length, seq_axis=0, batch_axis=1)
        return _manip.unstack(rev, num=len(seq))

    with variable_scope(scope or "bidirectional_rnn"):
        out_fw, st_fw = static_rnn(
            cell_fw, xs, initial_state_fw, dtype, sequence_length, scope="fw"
        )
        with name_scope("bw"):
            xs_bw = backwards(xs)
        out_bw, st_bw = static_rnn(
            cell_bw, xs_bw, initial_state_bw, dtype, sequence_length, scope="bw"
        )
        with name_scope("bw"):
            out_bw = backwards(out_bw)
        outputs = [_manip.concat([f, b], 1) for f, b in zip(out_fw, out_bw)]
    return outputs, st_fw, st_bw


def bidirectional_dynamic_rnn(
    cell_fw: RNNCell,
    cell_bw: RNNCell,
    inputs: Any,
    sequence_length: Any = None,
    initial_state_fw: Any = None,
    initial_state_bw: Any = None,
    dtype: Any = None,
    parallel_iterations: Any = None,
    swap_memory: bool = False,
    time_major: bool = False,
    scope: Any = None,
) -> tuple[tuple, tuple]:
    """TF1's ``tf.nn.bidirectional_dynamic_rnn``: ``((output_fw, output_bw), (state_fw,
    state_bw))``. The forward cell runs ``dynamic_rnn`` over the inputs; the backward cell runs
    it over the inputs reversed in time (each row within its own ``sequence_length`` when given,
    by ``reverse_sequence``) and its outputs are reversed back, so both are in time order and
    zero past each row's length. Variables under ``bidirectional_rnn/fw`` and ``/bw`` as in TF.
    The time dimension may be unknown until the graph runs (both directions then loop)."""
    x, _ = _time_steps(inputs, time_major, "bidirectional_dynamic_rnn")
    t_axis, b_axis = (0, 1) if time_major else (1, 0)

    def backwards(v: Tensor) -> Tensor:
        if sequence_length is None:
            return _manip.reverse(v, [t_axis])
        return _manip.reverse_sequence(v, sequence_length, seq_axis=t_axis, batch_axis=b_axis)

    with variable_scope(scope or "bidirectional_rnn"):
        out_fw, st_fw = dynamic_rnn(
            cell_fw,
            x,
            sequence_length,
            initial_state_fw,
            dtype,
            parallel_iterations,
            time_major=time_major,
            scope="fw",
        )
        with name_scope("bw"):
            x_bw = backwards(x)
        out_bw, st_bw = dynamic_rnn(
            cell_bw,
            x_bw,
            sequence_length,
            initial_state_bw,
            dtype,
            parallel_iterations,
            time_major=time_major,
            scope="bw",
        )
        with name_scope("bw"):
            out_bw = backwards(out_bw)
    return (out_fw, out_bw), (st_fw, st_bw)


def _rnn_loop(cell, x, sequence_length, initial_state, dtype, time_major, scope, parallel=None):
    """dynamic_rnn over a time dimension known only when the graph runs: a while_loop, one
    iteration per step, the outputs stacked as they come."""
    from .functional import _appended
    from .graph import TensorShape
    from .nest import _flatten, _pack
    from .while_loop import while_loop

    rank = x.shape.ndims
    xt = x if time_major else _manip.transpose(x, [1, 0, *range(2, rank)])
    with variable_scope(scope or "rnn"):
        if initial_state is None:
            if dtype is None:
                raise ValueError("dynamic_rnn: give initial_state or dtype")
            state0 = cell._zero_state_like(xt[0], dtype)
        else:
            state0 = initial_state
        flat0 = [convert_to_tensor(v) for v in _flatten(state0)]
        k = len(flat0)
        lengths = _lengths(sequence_length)
        n = _array.shape(xt)[0]
        out_dtype = flat0[0].dtype
        seen: dict = {}

        def body(t, *vals):
            state = _pack(state0, list(vals[:k]))
            out, new = cell(_manip.gather(xt, t), state)
            flat_new = [convert_to_tensor(v) for v in _flatten(new)]
            if lengths is not None:
                out, flat_new = _masked(out, flat_new, list(vals[:k]), lengths, t)
            seen["shape"] = out.shape
            first = _math.equal(t, convert_to_tensor(np.int32(0)))
            return (t + 1, *flat_new, _appended(vals[k], out, first, False))

        res = while_loop(
            lambda t, *v: _math.less(t, n),
            body,
            [convert_to_tensor(np.int32(0)), *flat0, _manip.zeros([0], out_dtype)],
            shape_invariants=[TensorShape([]), *[v.shape for v in flat0], TensorShape(None)],
            parallel_iterations=32 if parallel is None else parallel,
            return_same_structure=True,
        )
    outs = res[k + 1]
    step = seen.get("shape")  # one step's output: [batch, ...] (ConvLSTM's [batch, h, w, c])
    rest = list(step.dims[1:]) if step is not None and step.dims is not None else [None]
    if rest and all(d is not None for d in rest):
        batch = xt.shape.dims[1]
        if batch is not None:  # [time, batch, ...], also for no steps at all
            outs = _array.reshape(outs, [-1, batch, *rest])
        else:
            outs.set_shape(TensorShape([None, None, *rest]))
    if not time_major:
        outs = _manip.transpose(outs, [1, 0, *range(2, 2 + len(rest))])
    return outs, _pack(state0, list(res[1 : k + 1]))
