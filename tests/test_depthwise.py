"""Depthwise convolution as its own kernels (runtime/ops/depthwise.py, depthwise_cpu.py): the
compiled CPU loops and the broadcast tap loop (float16, cupy) against the direct sum, gradients
against finite differences, both against TensorFlow where installed, and the flops the
simulator charges."""

import numpy as np
import pytest
from opcheck import check_gradient

import hetbed as hb
import hetbed.compat.v1 as tf
from hetbed.runtime.ops import depthwise as dw_mod

RNG = np.random.default_rng(17)


def _ref(x, f, strides, padding, dil):
    """Direct sum: out[n, oy, ox, c*M + m] = sum_ij x[n, oy*s + i*d - p, ox*s + j*d - p, c] f."""
    n, h, w, c = x.shape
    kh, kw, _, m = f.shape
    plans = []
    for size, k, s, d in ((h, kh, strides[0], dil[0]), (w, kw, strides[1], dil[1])):
        span = (k - 1) * d + 1
        if padding == "SAME":
            out = -(-size // s)
            plans.append((out, max((out - 1) * s + span - size, 0) // 2))
        else:
            plans.append(((size - span) // s + 1, 0))
    (ho, pt), (wo, pl) = plans
    y = np.zeros((n, ho, wo, c, m))
    for oy in range(ho):
        for ox in range(wo):
            for i in range(kh):
                for j in range(kw):
                    yy, xx = oy * strides[0] - pt + i * dil[0], ox * strides[1] - pl + j * dil[1]
                    if 0 <= yy < h and 0 <= xx < w:
                        y[:, oy, ox] += x[:, yy, xx, :, None] * f[i, j]
    return y.reshape(n, ho, wo, c * m)


@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize(
    "strides,padding,dil",
    [((1, 1), "SAME", (1, 1)), ((2, 1), "VALID", (1, 1)), ((1, 1), "SAME", (2, 2))],
)
def test_depthwise_matches_the_direct_sum_in_every_path(m, strides, padding, dil):
    x = RNG.standard_normal((2, 7, 6, 4))
    f = RNG.standard_normal((3, 2, 4, m))
    want = _ref(x, f, strides, padding, dil)
    for dt, tol in ((np.float64, 1e-12), (np.float32, 1e-5), (np.float16, 2e-2)):
        with tf.Graph().as_default(), tf.Session() as s:
            y = tf.nn.depthwise_conv2d(
                x.astype(dt), f.astype(dt), [1, *strides, 1], padding, rate=list(dil)
            )
            got = s.run(y)
        assert y.shape.as_list() == list(want.shape) and got.dtype == dt
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10, err_msg=str(dt))


@pytest.mark.parametrize("m", [1, 2])
def test_depthwise_gradients_match_finite_differences(m):
    x = RNG.standard_normal((2, 5, 6, 3))
    f = RNG.standard_normal((3, 3, 3, m))
    check_gradient(lambda a, b: tf.nn.depthwise_conv2d(a, b, [1, 2, 1, 1], "SAME"), [x, f])
    check_gradient(
        lambda a, b: tf.nn.depthwise_conv2d(a, b, [1, 1, 1, 1], "VALID", rate=[1, 2]), [x, f]
    )


def test_the_broadcast_loop_gives_the_compiled_kernels_values(monkeypatch):
    """The path a GPU (cupy) takes, forced on numpy arrays, against the compiled one."""
    x = RNG.standard_normal((2, 9, 8, 5)).astype(np.float32)
    f = RNG.standard_normal((3, 3, 5, 2)).astype(np.float32)

    def run():
        with tf.Graph().as_default(), tf.Session() as s:
            xv, fv = tf.constant(x), tf.constant(f)
            y = tf.nn.depthwise_conv2d(xv, fv, [1, 2, 2, 1], "SAME")
            return s.run([y, *tf.gradients(tf.reduce_sum(y * y), [xv, fv])])

    compiled = run()
    monkeypatch.setattr(dw_mod, "_fast", lambda *a: None)
    looped = run()
    for a, b in zip(compiled, looped):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def test_depthwise_flops_are_the_ops_own():
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [4, 10, 10, 8])
        y = tf.nn.depthwise_conv2d(x, hb.zeros([3, 3, 8, 2]), [1, 1, 1, 1], "SAME")
        op = y.op
        cost = op.op_def.cost_fn(op, [(4, 10, 10, 8), (3, 3, 8, 2)], [(4, 10, 10, 16)])
    assert cost.flops == 2.0 * 4 * 10 * 10 * 8 * 2 * 3 * 3


def test_depthwise_matches_tensorflow():
    tf1 = pytest.importorskip("tensorflow.compat.v1")
    x = RNG.standard_normal((2, 11, 10, 6)).astype(np.float32)
    f = RNG.standard_normal((3, 3, 6, 2)).astype(np.float32)

    def run(t):
        g = t.Graph()
        with g.as_default(), t.Session(graph=g) as s:
            xv, fv = t.constant(x), t.constant(f)
            outs = []
            for st, pad, rate in (([1, 1, 1, 1], "SAME", None), ([1, 2, 2, 1], "VALID", None),
                                  ([1, 1, 1, 1], "SAME", [2, 2])):  # fmt: skip
                y = t.nn.depthwise_conv2d(xv, fv, st, pad, rate=rate)
                outs += [y, *t.gradients(t.reduce_sum(y * y), [xv, fv])]
            return s.run(outs)

    for a, b in zip(run(tf), run(tf1)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
