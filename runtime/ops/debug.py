"""Debugging ops (TF1 semantics): Print and print, CheckNumerics, IsNan/IsInf/IsFinite,
add_check_numerics_ops, and the static assert_* helpers (assert_rank, assert_type, ...)
that raise while the graph is built when the answer is known, else add a runtime Assert."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from .. import dtypes as _dt
from ..errors import InvalidArgumentError
from ..graph import Operation, Tensor, get_default_graph
from ..registry import Cost, apply, apply_op, convert_to_tensor, defop, elementwise_cost
from .control import Assert, group, no_op


def _no_cost(op, ins, outs):
    return Cost()


def _host(x: Any) -> np.ndarray:
    get = getattr(x, "get", None)  # a cupy array
    return np.asarray(get() if callable(get) else x)


# ---- value formatting ------------------------------------------------------------------------


def _item(v: Any) -> str:
    if isinstance(v, (float, np.floating)):
        return np.format_float_positional(v, trim="-") if np.isfinite(v) else str(v)
    if isinstance(v, (bool, np.bool_)):
        return str(int(v))
    return str(v.decode() if isinstance(v, bytes) else v)


def summarize_v1(a: np.ndarray, n: int) -> str:
    """TF1's Print format of one tensor (without the outer brackets): its first ``n`` values,
    inner dimensions in brackets ("1 2 3", "[1 2][3 4]"), "..." when cut short."""
    a = np.asarray(a)
    if a.ndim == 0:
        return _item(a.item())
    flat = a.reshape(-1)
    shown = flat.size if n < 0 else min(n, flat.size)
    spans = [int(np.prod(a.shape[k:])) for k in range(1, a.ndim)]  # inner dimensions only
    out = []
    for i in range(shown):
        opens = sum(1 for s in spans if s and i % s == 0)
        if opens:
            out.append("[" * opens)
        elif i:
            out.append(" ")
        out.append(_item(flat[i]))
        out.append("]" * sum(1 for s in spans if s and (i + 1) % s == 0))
    if shown < flat.size:
        out.append("..." + "]" * sum(1 for s in spans if s and shown % s != 0))
    return "".join(out)


def summarize_v2(a: np.ndarray, n: int) -> str:
    """tf.print's format: numpy-like, each dimension longer than 2n shown as its first and last
    ``n`` entries around "..."."""
    a = np.asarray(a)

    def fmt(x: np.ndarray) -> str:
        if x.ndim == 0:
            return _item(x.item())
        items = list(x)
        parts = [fmt(np.asarray(v)) for v in items]
        if n >= 0 and len(items) > 2 * n:
            parts = parts[:n] + ["..."] + parts[len(items) - n :]
        sep = " " if x.ndim == 1 else "\n" + " " * (a.ndim - x.ndim + 1)
        return "[" + sep.join(parts) + "]"

    return fmt(a)


# ---- Print (TF1) ---------------------------------------------------------------------------

PrintOp = defop("Print", stateful=True, passes_sparse=False, cost=_no_cost)


@PrintOp.shape
def _print_shape(op):
    x = op.inputs[0]
    return [(x.shape, x.dtype)]


@PrintOp.kernel("cpu")
def _print(ctx, x, *data):
    first_n = ctx.attrs["first_n"]
    count = ctx.state or 0
    ctx.state = count + 1
    if first_n < 0 or count < first_n:
        n = ctx.attrs["summarize"]
        text = ctx.attrs["message"] + "".join(f"[{summarize_v1(_host(d), n)}]" for d in data)
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    return x


@PrintOp.gradient
def _print_grad(op, g):
    return [g] + [None] * (len(op.inputs) - 1)


def Print(  # noqa: N802 - TF's name
    input_: Any,
    data: Any,
    message: str | None = None,
    first_n: int | None = None,
    summarize: int | None = None,
    name: str | None = None,
) -> Tensor:
    """TF1's ``tf.Print``: the identity of ``input_`` that, each time it runs, writes ``message``
    and the first ``summarize`` (default 3) values of each tensor in ``data`` to stderr; only the
    first ``first_n`` runs print (per op and session; default: every run)."""
    items = list(data) if isinstance(data, (list, tuple)) else [data]
    tensors = [convert_to_tensor(d) for d in items]
    return apply(
        "Print",
        [input_, *tensors],
        {
            "message": message or "",
            "first_n": -1 if first_n is None else int(first_n),
            "summarize": 3 if summarize is None else int(summarize),
        },
        name=name or "Print",
    )


# ---- print (TF2 form) ----------------------------------------------------------------------

PrintV2 = defop("PrintV2", stateful=True, differentiable=False, cost=_no_cost)


@PrintV2.shape
def _print_v2_shape(op):
    return []


@PrintV2.kernel("cpu")
def _print_v2(ctx, *data):
    n = ctx.attrs["summarize"]
    parts = []
    for kind, v in ctx.attrs["template"]:
        parts.append(v if kind == "s" else summarize_v2(_host(data[v]), n))
    text = ctx.attrs["sep"].join(parts) + ctx.attrs["end"]
    where = ctx.attrs["output_stream"]
    if where.startswith("file://"):
        with open(where[len("file://") :], "a", encoding="utf-8") as f:
            f.write(text)
        return None
    stream = sys.stdout if where == "stdout" else sys.stderr
    stream.write(text)
    stream.flush()
    return None


def _stream_name(output_stream: Any) -> str:
    if output_stream is sys.stdout or output_stream == "stdout":
        return "stdout"
    if output_stream is sys.stderr or output_stream == "stderr":
        return "stderr"
    if isinstance(output_stream, str) and output_stream.startswith("file://"):
        return output_stream
    raise ValueError(
        f"print: output_stream must be sys.stdout, sys.stderr or 'file://<path>', "
        f"got {output_stream!r}"
    )


def print_(
    *inputs: Any,
    output_stream: Any = None,
    summarize: int = 3,
    sep: str = " ",
    end: str = "\n",
    name: str | None = None,
) -> Operation:
    """TF's ``tf.print``: an op that writes ``inputs`` (strings as they are, tensors numpy-like
    with at most ``summarize`` leading and trailing entries per dimension) joined by ``sep`` to
    ``output_stream`` (sys.stderr by default) when it runs; fetch it or add it as a control
    dependency."""
    tensors, template = [], []
    for item in inputs:
        if isinstance(item, (str, bytes)):
            template.append(("s", item.decode() if isinstance(item, bytes) else item))
        else:
            template.append(("t", len(tensors)))
            tensors.append(convert_to_tensor(item))
    return apply_op(
        "PrintV2",
        tensors,
        {
            "template": tuple(template),
            "summarize": -1 if summarize is None else int(summarize),
            "sep": sep,
            "end": end,
            "output_stream": _stream_name(sys.stderr if output_stream is None else output_stream),
        },
        name=name or "PrintV2",
    )


# ---- CheckNumerics ---------------------------------------------------------------------------

CheckNumerics = defop("CheckNumerics", cost=elementwise_cost(1))


@CheckNumerics.shape
def _check_numerics_shape(op):
    x = op.inputs[0]
    if not x.dtype.is_floating:
        raise InvalidArgumentError(
            f"CheckNumerics: the tensor must be floating point, got {x.dtype.name} ({x.name})"
        )
    return [(x.shape, x.dtype)]


@CheckNumerics.kernel("cpu", "gpu")
def _check_numerics(ctx, x):
    xp = ctx.xp
    if bool(xp.all(xp.isfinite(x))):
        return x
    has_nan, has_inf = bool(xp.any(xp.isnan(x))), bool(xp.any(xp.isinf(x)))
    what = " and ".join(w for w, on in (("Inf", has_inf), ("NaN", has_nan)) if on)
    raise InvalidArgumentError(
        f"{ctx.attrs['message']} : Tensor had {what} values "
        f"(CheckNumerics {ctx.op.name!r}, shape {tuple(x.shape)})"
    )


@CheckNumerics.gradient
def _check_numerics_grad(op, g):
    msg = "Not a number (NaN) or infinity (Inf) values detected in gradient. "
    return [check_numerics(g, msg + op.attrs["message"])]


def check_numerics(tensor: Any, message: str, name: str | None = None) -> Tensor:
    """TF's ``tf.check_numerics``: the identity of a float ``tensor`` that fails the step with
    InvalidArgumentError ("<message> : Tensor had NaN values", naming the op) when it holds a NaN
    or an Inf. Its gradient is checked the same way."""
    return apply("CheckNumerics", [tensor], {"message": str(message)}, name=name or "CheckNumerics")


def verify_tensor_all_finite(
    t: Any = None,
    msg: str | None = None,
    name: str | None = None,
    x: Any = None,
    message: str | None = None,
) -> Tensor:
    """TF1's ``tf.verify_tensor_all_finite``: ``check_numerics(t, msg)``."""
    t = x if t is None else t
    msg = message if msg is None else msg
    g = get_default_graph()
    with g.name_scope(name or "VerifyFinite"):
        return check_numerics(t, msg)


_CONTROL_FLOW = {"Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond"}


def add_check_numerics_ops() -> Operation:
    """TF1's ``tf.add_check_numerics_ops``: a group of CheckNumerics over every float output of
    the default graph's ops (made so far). Refuses graphs with control flow, as TF1 does."""
    g = get_default_graph()
    checks = []
    ops = list(g.get_operations())
    if any(op.type in _CONTROL_FLOW for op in ops):
        raise ValueError(
            "add_check_numerics_ops() is not compatible with control flow ops such as "
            "cond() or while_loop()"
        )
    for op in ops:
        if op.op_def is not None and op.op_def.is_ref:
            continue  # a variable's reference (TF1 skips ref dtypes too)
        for out in op.outputs:
            if out.dtype.is_floating and op.type != "CheckNumerics":
                deps = [checks[-1]] if checks else []
                with g.control_dependencies(deps), g.colocate_with(op):
                    msg = f"{op.name}:{out.value_index}"
                    checks.append(check_numerics(out, msg).op)
    return group(*checks, name="CheckNumerics_all") if checks else no_op("CheckNumerics_all")


# ---- IsNan / IsInf / IsFinite: the elementwise ops of math_extra.py -------------------------

from .math_extra import is_finite, is_inf, is_nan  # noqa: E402, F401

# ---- static checks -------------------------------------------------------------------------


def _static_rank(x: Tensor) -> int | None:
    return x.shape.ndims


def _describe(x: Tensor) -> str:
    return f"Tensor {x.name} (shape {x.shape}, {x.dtype.name})"


def _rank_check(
    x: Any, ok: Any, want: str, build_cond: Any, message: Any, name: str, data: Any
) -> Operation:
    x = convert_to_tensor(x)
    r = _static_rank(x)
    prefix = f"{message}  " if message else ""
    g = get_default_graph()
    if r is not None:
        if not ok(r):
            raise ValueError(f"{prefix}{_describe(x)} must have rank {want}. Received rank {r}")
        return no_op(name=name)
    from .array import rank as rank_of

    with g.name_scope(name):
        if data is None:
            data = [f"{_describe(x)} must have rank {want}. Received rank: ", rank_of(x)]
        if message:
            data = [message, *data]
        return Assert(build_cond(rank_of(x)), data)


def assert_rank(
    x: Any, rank: int, data: Any = None, summarize: Any = None, message: Any = None, name=None
) -> Operation:
    """TF's ``tf.assert_rank``: ValueError now when ``x``'s rank is known and differs (a no_op
    when it matches), else an Assert that fails the step."""
    from .math import equal

    want = int(rank)
    return _rank_check(
        x, lambda r: r == want, str(want), lambda rt: equal(rt, want), message,
        name or "assert_rank", data,
    )  # fmt: skip


def assert_rank_at_least(
    x: Any, rank: int, data: Any = None, summarize: Any = None, message: Any = None, name=None
) -> Operation:
    """TF's ``tf.assert_rank_at_least``: like assert_rank, for rank >= ``rank``."""
    from .math import greater_equal

    want = int(rank)
    return _rank_check(
        x, lambda r: r >= want, f"at least {want}", lambda rt: greater_equal(rt, want),
        message, name or "assert_rank_at_least", data,
    )  # fmt: skip


def assert_rank_in(
    x: Any, ranks: Any, data: Any = None, summarize: Any = None, message: Any = None, name=None
) -> Operation:
    """TF's ``tf.assert_rank_in``: like assert_rank, for a rank in ``ranks``."""
    from .math import equal, reduce_any

    wants = [int(r) for r in ranks]

    def cond(rt):
        from .manip import stack

        return reduce_any(stack([equal(rt, w) for w in wants]))

    return _rank_check(
        x, lambda r: r in wants, f"in {tuple(wants)}", cond, message,
        name or "assert_rank_in", data,
    )  # fmt: skip


def assert_type(tensor: Any, tf_type: Any, message: Any = None, name: Any = None) -> Operation:
    """TF's ``tf.assert_type``: TypeError now unless ``tensor`` has dtype ``tf_type``; a no_op."""
    t = convert_to_tensor(tensor)
    want = _dt.as_dtype(tf_type)
    if t.dtype != want:
        prefix = f"{message}  " if message else ""
        raise TypeError(f"{prefix}{t.name} must be of type {want.name}; got {t.dtype.name}")
    return no_op(name=name or "assert_type")


def assert_integer(x: Any, message: Any = None, name: Any = None) -> Operation:
    """TF's ``tf.assert_integer``: TypeError now unless ``x`` has an integer dtype; a no_op."""
    t = convert_to_tensor(x)
    if not t.dtype.is_integer:
        prefix = f"{message}  " if message else ""
        raise TypeError(f"{prefix}Expected integer type for {t.name}, got {t.dtype.name}")
    return no_op(name=name or "assert_integer")


def assert_scalar(tensor: Any, name: Any = None, message: Any = None) -> Tensor:
    """TF's ``tf.assert_scalar``: ValueError now when ``tensor``'s rank is known and not 0;
    returns ``tensor``."""
    t = convert_to_tensor(tensor)
    r = _static_rank(t)
    if r is not None and r != 0:
        prefix = f"{message}  " if message else ""
        raise ValueError(f"{prefix}Expected scalar shape for {t.name}, saw shape: {t.shape}")
    if r is None:
        from .array import identity

        with get_default_graph().control_dependencies([assert_rank(t, 0, message=message)]):
            return identity(t, name=name or "assert_scalar")
    return t


def assert_same_float_dtype(tensors: Any = None, dtype: Any = None) -> _dt.DType:
    """TF's ``tf.assert_same_float_dtype``: the common float dtype of ``tensors`` (and
    ``dtype``); ValueError when they differ or are not floating point. float32 if none given."""
    found = _dt.as_dtype(dtype) if dtype is not None else None
    for t in tensors or ():
        if t is None:
            continue
        d = convert_to_tensor(t).dtype if not hasattr(t, "dtype") else _dt.as_dtype(t.dtype)
        if found is None:
            found = d
        elif d != found:
            raise ValueError(f"{getattr(t, 'name', t)}: expected dtype {found.name}, got {d.name}")
    if found is None:
        return _dt.float32
    if not found.is_floating:
        raise ValueError(f"Expected floating point type, got {found.name}")
    return found


def is_numeric_tensor(tensor: Any) -> bool:
    """TF's ``tf.is_numeric_tensor``: a Tensor whose dtype is a number type (not bool)."""
    return isinstance(tensor, Tensor) and tensor.dtype.is_numeric
