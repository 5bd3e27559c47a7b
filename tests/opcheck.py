"""Shared checks for ops: forward values against a numpy reference, gradients against
central finite differences (in float64), on every device type present."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

import hetbed as hb


def run(build: Callable, inputs: Sequence[np.ndarray], **session_kw):
    """Build ``build(*placeholders)`` in a fresh graph and return its value on ``inputs``."""
    g = hb.Graph()
    with g.as_default():
        phs = [hb.placeholder(hb.as_dtype(x.dtype), np.shape(x)) for x in inputs]
        out = build(*phs)
        with hb.Session(graph=g, **session_kw) as s:
            return s.run(out, dict(zip(phs, inputs)))


def check_forward(
    build: Callable,
    inputs: Sequence[np.ndarray],
    reference: Callable,
    rtol: float = 1e-6,
    atol: float = 1e-6,
) -> None:
    """The op's value equals ``reference(*inputs)``; dtype and shape match the static ones."""
    g = hb.Graph()
    with g.as_default():
        phs = [hb.placeholder(hb.as_dtype(x.dtype), np.shape(x)) for x in inputs]
        out = build(*phs)
        outs = out if isinstance(out, (list, tuple)) else [out]
        with hb.Session(graph=g) as s:
            got = s.run(list(outs), dict(zip(phs, inputs)))
    want = reference(*inputs)
    wants = want if isinstance(want, (list, tuple)) else [want]
    assert len(got) == len(wants)
    for t, a, b in zip(outs, got, wants):
        a = np.asarray(a)
        b = np.asarray(b)
        assert a.dtype == t.dtype.np, f"{t.name}: kernel gave {a.dtype}, graph says {t.dtype.name}"
        assert t.shape.is_compatible_with(a.shape), f"{t.name}: static {t.shape} vs {a.shape}"
        assert a.shape == b.shape, f"{t.name}: shape {a.shape} vs reference {b.shape}"
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=t.name)


def check_gradient(
    build: Callable,
    inputs: Sequence[np.ndarray],
    wrt: Sequence[int] | None = None,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    seed: int = 0,
) -> None:
    """hb.gradients of sum(w * build(x)) equals central finite differences, for float64 inputs."""
    inputs = [np.asarray(x) for x in inputs]
    wrt = list(range(len(inputs))) if wrt is None else list(wrt)
    rng = np.random.default_rng(seed)
    g = hb.Graph()
    with g.as_default():
        phs = [hb.placeholder(hb.as_dtype(x.dtype), np.shape(x)) for x in inputs]
        out = build(*phs)
        wshape = tuple(out.shape.as_list())
        w = rng.standard_normal(wshape)
        loss = hb.reduce_sum(out * hb.constant(w, dtype=out.dtype))
        grads = hb.gradients(loss, [phs[i] for i in wrt])
        with hb.Session(graph=g) as s:
            feed = dict(zip(phs, inputs))
            analytic = s.run(
                [
                    hb.convert_to_tensor(gr) if not isinstance(gr, hb.IndexedSlices) else gr
                    for gr in grads
                ],
                feed,
            )

            def f(vals):
                return float(s.run(loss, dict(zip(phs, vals))))

            for k, i in enumerate(wrt):
                x = inputs[i].astype(np.float64)
                num = np.zeros_like(x)
                it = np.nditer(x, flags=["multi_index"])
                for _ in it:
                    idx = it.multi_index
                    xp, xm = x.copy(), x.copy()
                    xp[idx] += eps
                    xm[idx] -= eps
                    vp = list(inputs)
                    vm = list(inputs)
                    vp[i], vm[i] = xp, xm
                    num[idx] = (f(vp) - f(vm)) / (2 * eps)
                a = analytic[k]
                if isinstance(a, hb.IndexedSlicesValue):
                    a = a.to_dense()
                assert a is not None, f"no gradient for input {i}"
                np.testing.assert_allclose(
                    a, num, rtol=rtol, atol=atol, err_msg=f"gradient wrt input {i}"
                )
