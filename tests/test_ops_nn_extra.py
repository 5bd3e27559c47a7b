"""tf.nn additions (runtime/ops/nn_extra.py) and the 1-D / separable layers: values against
direct-loop numpy references, gradients against finite differences, error messages."""

import numpy as np
import pytest
from opcheck import check_forward, check_gradient, run

import hetbed as hb
import hetbed.compat.v1 as tf

RNG = np.random.default_rng(3)


def _x(*shape):
    return RNG.standard_normal(shape)


def _geometry(size, k, s, pad):
    if pad == "VALID":
        return (size - k) // s + 1, 0
    out = -(-size // s)
    return out, max((out - 1) * s + k - size, 0) // 2


def conv_ref(x, f, strides=(1, 1), pad="SAME", dil=(1, 1), depthwise=False):
    """Direct loop over the filter taps: TF's padding rule with the dilated window size."""
    n, h, w, c = x.shape
    kh, kw = f.shape[:2]
    (sh, sw), (dh, dw) = strides, dil
    ho, pt = _geometry(h, (kh - 1) * dh + 1, sh, pad)
    wo, pl = _geometry(w, (kw - 1) * dw + 1, sw, pad)
    xp = np.zeros((n, h + (ho + kh * dh) * sh, w + (wo + kw * dw) * sw, c))
    xp[:, pt : pt + h, pl : pl + w] = x
    cols = f.shape[2] * f.shape[3] if depthwise else f.shape[3]
    out = np.zeros((n, ho, wo, cols))
    for i in range(kh):
        for j in range(kw):
            win = xp[:, i * dh : i * dh + ho * sh : sh, j * dw : j * dw + wo * sw : sw]
            if depthwise:
                out += (win[..., :, None] * f[i, j]).reshape(n, ho, wo, cols)
            else:
                out += win @ f[i, j]
    return out


# ---- convolutions -----------------------------------------------------------------------------


@pytest.mark.parametrize("stride,pad,dil", [(1, "SAME", 1), (2, "VALID", 1), (1, "SAME", 2)])
def test_conv1d_matches_loop_and_gradient(stride, pad, dil):
    """conv1d (NWC) equals the reference on an inserted height axis; gradients match."""
    x, f = _x(2, 7, 2), _x(3, 2, 3)

    def build(a, b):
        return hb.nn.conv1d(a, b, stride=stride, padding=pad, dilations=dil)

    want = conv_ref(x[:, None], f[None], (1, stride), pad, (1, dil))[:, 0]
    check_forward(build, [x, f], lambda a, b: want)
    check_gradient(build, [x[:1], f])


@pytest.mark.parametrize("strides,pad,dil", [((1, 1), "SAME", (2, 2)), ((1, 1), "VALID", (2, 1))])
def test_dilated_conv2d_matches_loop_and_gradient(strides, pad, dil):
    """conv2d with dilations and atrous_conv2d equal a loop over the spread-out taps."""
    x, f = _x(1, 7, 6, 2), _x(2, 3, 2, 2)

    def build(a, b):
        return hb.nn.conv2d(a, b, [1, *strides, 1], pad, dilations=[1, *dil, 1])

    check_forward(build, [x, f], lambda a, b: conv_ref(a, b, strides, pad, dil))
    check_gradient(build, [x, f])
    if dil[0] == dil[1]:
        check_forward(
            lambda a, b: tf.nn.atrous_conv2d(a, b, dil[0], pad),
            [x, f],
            lambda a, b: conv_ref(a, b, (1, 1), pad, dil),
        )


def test_convolution_dispatches_on_rank():
    x1, f1 = _x(1, 6, 2), _x(2, 2, 3)
    got = run(lambda a, b: tf.nn.convolution(a, b, "VALID"), [x1, f1])
    np.testing.assert_allclose(got, conv_ref(x1[:, None], f1[None], pad="VALID")[:, 0])
    x2, f2 = _x(1, 5, 5, 2), _x(3, 3, 2, 2)
    got = run(lambda a, b: tf.nn.convolution(a, b, "SAME", strides=[2, 2]), [x2, f2])
    np.testing.assert_allclose(got, conv_ref(x2, f2, (2, 2), "SAME"))
    with pytest.raises(hb.errors.UnimplementedError, match="1-D and 2-D"):
        tf.nn.convolution(hb.zeros([1, 2, 2, 2, 1]), hb.zeros([1, 1, 1, 1, 1]), "SAME")


@pytest.mark.parametrize("strides,pad,rate", [(1, "SAME", 1), (2, "VALID", 1), (1, "SAME", 2)])
def test_depthwise_conv2d_matches_loop_and_gradient(strides, pad, rate):
    """Output channel c*M + m is input channel c convolved with filter[:, :, c, m]."""
    x, f = _x(1, 5, 6, 2), _x(2, 2, 2, 2)

    def build(a, b):
        return tf.nn.depthwise_conv2d(a, b, [1, strides, strides, 1], pad, rate=[rate, rate])

    want = conv_ref(x, f, (strides,) * 2, pad, (rate, rate), depthwise=True)
    check_forward(build, [x, f], lambda a, b: want)
    check_gradient(build, [x, f])
    native = run(lambda a, b: tf.nn.depthwise_conv2d_native(a, b, [1, 1, 1, 1], "VALID"), [x, f])
    np.testing.assert_allclose(native, conv_ref(x, f, pad="VALID", depthwise=True))


def test_separable_conv2d_is_depthwise_then_pointwise():
    x, dw, pw = _x(1, 5, 5, 2), _x(3, 3, 2, 2), _x(1, 1, 4, 3)

    def build(a, b, c):
        return tf.nn.separable_conv2d(a, b, c, [1, 1, 1, 1], "SAME")

    check_forward(build, [x, dw, pw], lambda a, b, c: conv_ref(conv_ref(a, b, depthwise=True), c))
    check_gradient(build, [x[:, :3, :3], dw[:2, :2], pw])


def test_conv_errors_name_the_function():
    x = hb.zeros([1, 4, 4, 2])
    with pytest.raises(hb.errors.UnimplementedError, match="NCHW"):
        tf.nn.depthwise_conv2d(x, hb.zeros([1, 1, 2, 1]), [1, 1, 1, 1], "SAME", data_format="NCHW")
    with pytest.raises(hb.errors.InvalidArgumentError, match="depthwise_conv2d: input depth 2"):
        tf.nn.depthwise_conv2d(x, hb.zeros([1, 1, 3, 1]), [1, 1, 1, 1], "SAME")
    with pytest.raises(hb.errors.UnimplementedError, match="conv1d: data_format 'NCW'"):
        tf.nn.conv1d(hb.zeros([1, 4, 2]), hb.zeros([1, 2, 2]), 1, "SAME", data_format="NCW")
    with pytest.raises(hb.errors.InvalidArgumentError, match="dilations must be"):
        hb.nn.conv2d(x, hb.zeros([1, 1, 2, 1]), [1, 1, 1, 1], "SAME", dilations=[2, 1, 1, 1])
    with pytest.raises(hb.errors.InvalidArgumentError, match="atrous_conv2d: rate"):
        tf.nn.atrous_conv2d(x, hb.zeros([1, 1, 2, 1]), 0, "SAME")


# ---- pooling ----------------------------------------------------------------------------------


def _pool1d_ref(x, k, s, op):
    wo = (x.shape[1] - k) // s + 1
    return np.stack([op(x[:, i * s : i * s + k], axis=1) for i in range(wo)], axis=1)


def test_pool_1d_and_2d_and_pool1d_functions():
    x = _x(2, 7, 3)
    got = run(lambda a: tf.nn.pool(a, [3], "MAX", "VALID", strides=[2]), [x])
    np.testing.assert_allclose(got, _pool1d_ref(x, 3, 2, np.max))
    got = run(lambda a: tf.nn.avg_pool1d(a, 2, 1, "VALID"), [x])
    np.testing.assert_allclose(got, _pool1d_ref(x, 2, 1, np.mean))
    got = run(lambda a: tf.nn.max_pool1d(a, [1, 3, 1], [1, 2, 1], "VALID"), [x])
    np.testing.assert_allclose(got, _pool1d_ref(x, 3, 2, np.max))
    x2 = _x(1, 4, 4, 2)
    got = run(lambda a: tf.nn.pool(a, [2, 2], "AVG", "VALID", strides=[2, 2]), [x2])
    np.testing.assert_allclose(got, x2.reshape(1, 2, 2, 2, 2, 2).mean(axis=(2, 4)))
    check_gradient(lambda a: tf.nn.pool(a, [2], "AVG", "SAME", strides=[2]), [x[:1]])
    with pytest.raises(hb.errors.UnimplementedError, match="dilation_rate"):
        tf.nn.pool(hb.zeros([1, 4, 1]), [2], "MAX", "SAME", dilation_rate=[2])
    with pytest.raises(hb.errors.InvalidArgumentError, match="pooling_type"):
        tf.nn.pool(hb.zeros([1, 4, 1]), [2], "MIN", "SAME")


def _argmax_pool_ref(x, k, s, pad, with_batch):
    """Loops: the first maximum (row-major) of each window and its flat index."""
    n, h, w, c = x.shape
    ho, pt = _geometry(h, k, s, pad)
    wo, pl = _geometry(w, k, s, pad)
    out, arg = np.zeros((n, ho, wo, c)), np.zeros((n, ho, wo, c), dtype=np.int64)
    for b, i, j, d in np.ndindex(n, ho, wo, c):
        best = None
        for y in range(i * s - pt, i * s - pt + k):
            for z in range(j * s - pl, j * s - pl + k):
                if 0 <= y < h and 0 <= z < w and (best is None or x[b, y, z, d] > best):
                    best = x[b, y, z, d]
                    arg[b, i, j, d] = ((b * h if with_batch else 0) + y) * w * c + z * c + d
        out[b, i, j, d] = best
    return out, arg


@pytest.mark.parametrize("pad,with_batch", [("SAME", False), ("VALID", True)])
def test_max_pool_with_argmax_and_gradient(pad, with_batch):
    x = _x(2, 5, 4, 2)
    x[0, 0, 0, 0] = x[0, 0, 1, 0] = 9.0  # a tie: the first in row-major order wins

    def build(a):
        return list(
            tf.nn.max_pool_with_argmax(a, [1, 3, 3, 1], [1, 2, 2, 1], pad,
                                       include_batch_in_index=with_batch)
        )  # fmt: skip

    check_forward(build, [x], lambda a: list(_argmax_pool_ref(a, 3, 2, pad, with_batch)))
    check_gradient(lambda a: build(a)[0], [_x(1, 5, 4, 1)])
    ints = RNG.integers(-5, 5, (1, 4, 4, 1)).astype(np.int32)
    got = run(lambda a: tf.nn.max_pool_with_argmax(a, 2, 2, "VALID", Targmax=hb.int32), [ints])
    want = _argmax_pool_ref(ints, 2, 2, "VALID", False)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert got[1].dtype == np.int32
    with pytest.raises(hb.errors.InvalidArgumentError, match="Targmax"):
        tf.nn.max_pool_with_argmax(hb.zeros([1, 2, 2, 1]), 2, 2, "VALID", Targmax=hb.float32)


# ---- normalization, activations, losses -----------------------------------------------------


def _lrn_ref(x, r, bias, alpha, beta):
    c = x.shape[-1]
    sq = np.zeros_like(x)
    for d in range(c):
        sq[..., d] = (x[..., max(d - r, 0) : d + r + 1] ** 2).sum(-1)
    return x / (bias + alpha * sq) ** beta


def test_local_response_normalization_and_gradient():
    x = _x(1, 2, 2, 5)

    def build(a):
        return tf.nn.lrn(a, depth_radius=1, bias=1.5, alpha=0.3, beta=0.75)

    check_forward(build, [x], lambda a: _lrn_ref(a, 1, 1.5, 0.3, 0.75))
    check_gradient(build, [x])
    assert tf.nn.local_response_normalization is tf.nn.lrn
    with pytest.raises(hb.errors.InvalidArgumentError, match="lrn: input must be 4-D"):
        tf.nn.lrn(hb.zeros([2, 3]))


def _np_selu(x):
    return 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x))


ACTS = {
    "selu": (tf.nn.selu, _np_selu),
    "softsign": (tf.nn.softsign, lambda x: x / (1 + np.abs(x))),
    "crelu": (tf.nn.crelu, lambda x: np.concatenate([np.maximum(x, 0), np.maximum(-x, 0)], -1)),
}


@pytest.mark.parametrize("name", sorted(ACTS))
def test_activations_values_and_gradients(name):
    fn, ref = ACTS[name]
    x = _x(3, 4)
    x[np.abs(x) < 0.05] = 0.3  # away from the kink at 0
    check_forward(fn, [x], ref)
    check_gradient(fn, [x])


def test_weighted_cross_entropy_with_logits():
    x, z = _x(3, 4) * 4, RNG.uniform(size=(3, 4))

    def ref(x, z, q=2.5):
        sig = 1 / (1 + np.exp(-x))
        return -(q * z * np.log(sig) + (1 - z) * np.log(1 - sig))

    def build(a, b):
        return tf.nn.weighted_cross_entropy_with_logits(labels=b, logits=a, pos_weight=2.5)

    check_forward(build, [x, z], ref, rtol=1e-9)
    check_gradient(build, [x, z])
    big = run(lambda a, b: build(a, b), [np.array([-800.0, 800.0]), np.array([1.0, 0.0])])
    np.testing.assert_allclose(big, [2000.0, 800.0])  # stable where exp overflows
    with pytest.raises(hb.errors.InvalidArgumentError, match="same shape"):
        build(hb.zeros([2, 3], hb.float64), hb.zeros([3, 2], hb.float64))


def test_swish_relu_layer_zero_fraction_and_pool2d_aliases():
    x, w, b = _x(3, 4), _x(4, 2), _x(2)
    check_forward(lambda a: tf.nn.swish(a, beta=0.7), [x], lambda a: a / (1 + np.exp(-0.7 * a)))
    check_gradient(lambda a: tf.nn.swish(a), [x])
    check_forward(tf.nn.relu_layer, [x, w, b], lambda a, c, d: np.maximum(a @ c + d, 0))
    z = np.array([[0.0, 1.0, 0.0, 2.0]])
    check_forward(tf.nn.zero_fraction, [z], lambda a: np.float32(0.5))
    x4 = _x(1, 4, 4, 1)
    got = run(lambda a: [tf.nn.max_pool2d(a, 2, 2, "VALID"), tf.nn.avg_pool2d(a, 2, 2, "VALID")],
              [x4])  # fmt: skip
    blocks = x4.reshape(1, 2, 2, 2, 2, 1)
    np.testing.assert_allclose(got[0], blocks.max(axis=(2, 4)))
    np.testing.assert_allclose(got[1], blocks.mean(axis=(2, 4)))


def test_existing_nn_names_cover_tf1():
    """relu6 and moments exist already; the new names are in tf.nn."""
    for n in ("relu6", "moments", "selu", "softsign", "crelu", "lrn", "conv1d", "pool"):
        assert callable(getattr(tf.nn, n)), n


# ---- layers -----------------------------------------------------------------------------------


def _layer_values(build, x):
    g = hb.Graph()
    with g.as_default():
        out = build(hb.constant(x))
        with hb.Session() as s:
            s.run(hb.global_variables_initializer())
            vs = {v.name: v for v in hb.global_variables()}
            return s.run(out), s.run(vs)


def test_conv1d_and_pooling1d_layers():
    x = _x(2, 6, 3)

    def build(t):
        y = tf.layers.conv1d(t, 4, 3, padding="same", name="c1", use_bias=True)
        return [y, tf.layers.max_pooling1d(y, 2, 2), tf.layers.average_pooling1d(y, 3, 1)]

    (y, mp, ap), vs = _layer_values(build, x)
    k, b = vs["c1/kernel:0"], vs["c1/bias:0"]
    assert k.shape == (3, 3, 4)
    want = conv_ref(x[:, None], k[None])[:, 0] + b
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mp, _pool1d_ref(want, 2, 2, np.max), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ap, _pool1d_ref(want, 3, 1, np.mean), rtol=1e-5, atol=1e-5)


def test_separable_conv2d_layer():
    x = _x(1, 5, 5, 2)

    def build(t):
        return tf.layers.separable_conv2d(t, 3, 3, depth_multiplier=2, name="sep")

    y, vs = _layer_values(build, x)
    dk, pk = vs["sep/depthwise_kernel:0"], vs["sep/pointwise_kernel:0"]
    assert dk.shape == (3, 3, 2, 2) and pk.shape == (1, 1, 4, 3)
    want = conv_ref(conv_ref(x, dk, pad="VALID", depthwise=True), pk) + vs["sep/bias:0"]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_conv2d_layer_with_dilation_rate():
    x = _x(1, 6, 6, 1)
    y, vs = _layer_values(lambda t: tf.layers.conv2d(t, 2, 2, dilation_rate=2, name="d"), x)
    want = conv_ref(x, vs["d/kernel:0"], pad="VALID", dil=(2, 2)) + vs["d/bias:0"]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
