"""Neural-network ops (runtime/ops/nn.py): values against numpy and naive-loop references,
gradients against finite differences, TF's padding rules, costs and error messages."""

import math

import numpy as np
import pytest
from opcheck import check_forward, check_gradient

import hetbed as hb

RNG = np.random.default_rng(0)


def _x(*shape, dtype=np.float64, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(dtype)


def _away_from(x, points, margin=0.05):
    """``x`` with values within ``margin`` of a kink moved off it (finite differences need it)."""
    x = x.copy()
    for p in points:
        near = np.abs(x - p) < margin
        x[near] = p + np.where(x[near] >= p, margin, -margin) * 2
    return x


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


# ---- activations ---------------------------------------------------------------------------

ACTIVATIONS = {
    "relu": (hb.nn.relu, lambda x: np.maximum(x, 0), [0.0]),
    "relu6": (hb.nn.relu6, lambda x: np.clip(x, 0, 6), [0.0, 6.0]),
    "leaky_relu": (
        lambda x: hb.nn.leaky_relu(x, alpha=0.1),
        lambda x: np.where(x > 0, x, 0.1 * x),
        [0.0],
    ),
    "elu": (hb.nn.elu, lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))), [0.0]),
    "sigmoid": (hb.sigmoid, _sigmoid, []),
    "tanh": (hb.tanh, np.tanh, []),
    "softplus": (hb.nn.softplus, lambda x: np.logaddexp(0, x), []),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_forward(name):
    """Each activation equals its numpy formula in float32 and float64."""
    fn, ref, _ = ACTIVATIONS[name]
    x = _x(4, 7, scale=4.0)
    check_forward(fn, [x], ref, rtol=1e-12, atol=1e-12)
    check_forward(fn, [x.astype(np.float32)], lambda v: ref(v.astype(np.float64)), rtol=1e-5)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_gradient(name):
    """Each activation's gradient matches finite differences (away from its kinks)."""
    fn, _, kinks = ACTIVATIONS[name]
    x = _away_from(_x(3, 5, scale=4.0), kinks)
    check_gradient(fn, [x])


def test_activations_stable_at_extremes():
    """sigmoid, softplus and tanh give finite, exact-limit values for +-1000 without overflow."""
    x = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], np.float32)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        check_forward(hb.sigmoid, [x], lambda v: np.array([0, 0, 0.5, 1, 1], np.float32))
        check_forward(
            hb.nn.softplus, [x], lambda v: np.array([0, 0, np.log(2), 50, 1000], np.float32)
        )


@pytest.mark.parametrize("fn", [hb.sigmoid, hb.tanh])
def test_second_order_sigmoid_tanh(fn):
    """The gradient of the gradient of sigmoid and tanh matches finite differences."""

    def grad_of(x):
        (g,) = hb.gradients(hb.reduce_sum(fn(x) * hb.constant(np.linspace(-1, 1, 6))), [x])
        return g

    check_gradient(grad_of, [_x(6)])


def test_activations_on_scalars():
    """Activations accept 0-d tensors (and give 0-d results)."""
    for name in sorted(ACTIVATIONS):
        fn, ref, _ = ACTIVATIONS[name]
        check_forward(fn, [np.float32(0.3)], lambda v, ref=ref: np.float32(ref(v)), rtol=1e-6)


def test_integer_relu():
    """relu works on integers too."""
    x = np.array([-3, 0, 4], np.int32)
    check_forward(hb.nn.relu, [x], lambda v: np.maximum(v, 0))


# ---- softmax and losses --------------------------------------------------------------------


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_and_log_softmax(axis):
    """softmax and log_softmax equal the numpy formulas along any axis; gradients check."""
    x = _x(3, 4, 5)
    ref_ls = lambda v: _log_softmax(v, axis)  # noqa: E731
    check_forward(lambda t: hb.nn.softmax(t, axis=axis), [x], lambda v: np.exp(ref_ls(v)))
    check_forward(lambda t: hb.nn.log_softmax(t, axis=axis), [x], ref_ls)
    check_gradient(lambda t: hb.nn.softmax(t, axis=axis), [x])
    check_gradient(lambda t: hb.nn.log_softmax(t, axis=axis), [x])


def test_softmax_large_logits_stable():
    """Logits of 1000 give no overflow: softmax is finite, log_softmax exact."""
    x = np.array([[1000.0, 0.0, -1000.0]], np.float32)
    check_forward(hb.nn.softmax, [x], lambda v: np.array([[1.0, 0.0, 0.0]], np.float32))
    check_forward(hb.nn.log_softmax, [x], lambda v: np.array([[0.0, -1000, -2000]], np.float32))


def test_softmax_bad_axis():
    """An axis beyond the rank is rejected naming the rank."""
    with hb.Graph().as_default():
        with pytest.raises(hb.errors.InvalidArgumentError, match="axis 2 out of range for rank 2"):
            hb.nn.softmax(hb.constant(np.zeros((2, 3), np.float32)), axis=2)


def _soft_labels(*shape):
    e = np.exp(_x(*shape))
    return e / e.sum(-1, keepdims=True)


def test_softmax_cross_entropy_forward():
    """Per-example loss is -sum(labels * log_softmax(logits)), for rank 2 and 3, also stable."""
    for shape in [(4, 5), (2, 3, 4)]:
        logits, labels = _x(*shape), _soft_labels(*shape)
        check_forward(
            lambda a, b: hb.nn.softmax_cross_entropy_with_logits_v2(labels=b, logits=a),
            [logits, labels],
            lambda a, b: -(b * _log_softmax(a)).sum(-1),
        )
    big = np.array([[1000.0, -1000.0]], np.float32)
    onehot = np.array([[0.0, 1.0]], np.float32)
    check_forward(
        lambda a, b: hb.nn.softmax_cross_entropy_with_logits(labels=b, logits=a),
        [big, onehot],
        lambda a, b: np.array([2000.0], np.float32),
    )


def test_softmax_cross_entropy_gradients():
    """v2 differentiates both logits and labels; v1 (as in TF1) stops the label gradient. The
    logits' gradient is TF's kernel's, softmax - labels: exact where the labels along the axis
    sum to 1; with multi-hot labels TF's (and now hetbed's) is not the derivative of the loss,
    and TF1 programs train with it (values from TensorFlow 2.21)."""
    logits, labels = _x(3, 4), _soft_labels(3, 4)
    check_gradient(
        lambda a, b: hb.nn.softmax_cross_entropy_with_logits_v2(labels=b, logits=a),
        [logits, labels],
    )
    check_gradient(
        lambda a, b: hb.nn.softmax_cross_entropy_with_logits_v2(labels=b, logits=a, axis=0),
        [logits, _soft_labels(4, 3).T.copy()],  # (labels summing to 1 along the axis)
    )
    with hb.Graph().as_default():
        a = hb.constant([[1.0, 2.0, 3.0], [0.5, 0.5, 0.5]])
        multi_hot = hb.constant([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
        loss = hb.nn.softmax_cross_entropy_with_logits_v2(labels=multi_hot, logits=a)
        (ga,) = hb.gradients(hb.reduce_sum(loss), [a])
        with hb.Session() as s:
            np.testing.assert_allclose(
                s.run(ga), [[-0.90997, -0.75527, 0.66524], [1 / 3, 1 / 3, 1 / 3]], atol=1e-5
            )
    with hb.Graph().as_default():
        a, b = hb.constant(logits), hb.constant(labels)
        loss = hb.nn.softmax_cross_entropy_with_logits(labels=b, logits=a)
        ga, gb = hb.gradients(hb.reduce_sum(loss), [a, b])
        assert gb is None
        with hb.Session() as s:
            np.testing.assert_allclose(s.run(ga), np.exp(_log_softmax(logits)) - labels, atol=1e-12)


def test_softmax_cross_entropy_errors():
    """Mismatched shapes name both; positional arguments are refused as in TF."""
    with hb.Graph().as_default():
        a = hb.constant(np.zeros((2, 3), np.float32))
        b = hb.constant(np.zeros((2, 4), np.float32))
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"\(2, 3\).*\(2, 4\)"):
            hb.nn.softmax_cross_entropy_with_logits_v2(labels=b, logits=a)
        with pytest.raises(ValueError, match="named arguments"):
            hb.nn.softmax_cross_entropy_with_logits(b, a)


def test_sparse_softmax_cross_entropy():
    """Sparse CE picks -log_softmax at the label; int32/int64 labels; gradient = softmax - onehot."""
    logits = _x(5, 4)
    for dt in (np.int32, np.int64):
        labels = np.array([0, 3, 1, 1, 2], dt)
        check_forward(
            lambda a, b: hb.nn.sparse_softmax_cross_entropy_with_logits(labels=b, logits=a),
            [logits, labels],
            lambda a, b: -_log_softmax(a)[np.arange(5), b],
        )
    labels = np.array([0, 3, 1, 1, 2], np.int32)
    check_gradient(
        lambda a, b: hb.nn.sparse_softmax_cross_entropy_with_logits(labels=b, logits=a),
        [logits, labels],
        wrt=[0],
    )
    logits3, labels3 = _x(2, 3, 4), RNG.integers(0, 4, (2, 3)).astype(np.int64)
    check_forward(
        lambda a, b: hb.nn.sparse_softmax_cross_entropy_with_logits(labels=b, logits=a),
        [logits3, labels3],
        lambda a, b: -np.take_along_axis(_log_softmax(a), b[..., None], -1)[..., 0],
    )


def test_sparse_softmax_cross_entropy_label_out_of_range():
    """A label outside [0, num_classes) fails at run time naming the value and the range."""
    g = hb.Graph()
    with g.as_default():
        a = hb.placeholder(hb.float32, [2, 5])
        b = hb.placeholder(hb.int32, [2])
        loss = hb.nn.sparse_softmax_cross_entropy_with_logits(labels=b, logits=a)
        with hb.Session() as s:
            z = np.zeros((2, 5), np.float32)
            for bad in (5, -1):
                with pytest.raises(hb.errors.InvalidArgumentError, match=rf"{bad}.*\[0, 5\)"):
                    s.run(loss, {a: z, b: [0, bad]})
        with pytest.raises(hb.errors.InvalidArgumentError, match="labels shape"):
            hb.nn.sparse_softmax_cross_entropy_with_logits(labels=hb.constant([1, 2, 3]), logits=a)
        with pytest.raises(hb.errors.InvalidArgumentError, match="int32 or int64"):
            hb.nn.sparse_softmax_cross_entropy_with_logits(labels=a[:, 0], logits=a)


def test_sigmoid_cross_entropy():
    """Sigmoid CE equals -z log(s) - (1-z) log(1-s), is finite for huge logits; both gradients."""
    x, z = _x(3, 4, scale=3.0), RNG.uniform(size=(3, 4))
    s = _sigmoid(x)
    check_forward(
        lambda a, b: hb.nn.sigmoid_cross_entropy_with_logits(labels=b, logits=a),
        [x, z],
        lambda a, b: -b * np.log(s) - (1 - b) * np.log(1 - s),
        rtol=1e-10,
    )
    check_gradient(lambda a, b: hb.nn.sigmoid_cross_entropy_with_logits(labels=b, logits=a), [x, z])
    big = np.array([1000.0, -1000.0], np.float32)
    check_forward(
        lambda a, b: hb.nn.sigmoid_cross_entropy_with_logits(labels=b, logits=a),
        [big, np.array([0.0, 0.0], np.float32)],
        lambda a, b: np.array([1000.0, 0.0], np.float32),
    )


def test_l2_loss():
    """l2_loss is sum(x^2)/2, a scalar; its gradient is x."""
    x = _x(3, 4)
    check_forward(hb.nn.l2_loss, [x], lambda v: np.asarray((v**2).sum() / 2))
    check_forward(
        hb.nn.l2_loss, [x.astype(np.float32)], lambda v: np.asarray((v**2).sum() / 2), rtol=1e-5
    )
    check_gradient(hb.nn.l2_loss, [x])


# ---- bias_add, xw_plus_b, in_top_k, l2_normalize, moments, batch norm ------------------------


def test_bias_add_and_gradient():
    """bias_add adds along the last dim; the bias gradient sums every other axis."""
    v, b = _x(2, 3, 4), _x(4)
    check_forward(hb.nn.bias_add, [v, b], lambda a, c: a + c)
    check_gradient(hb.nn.bias_add, [v, b])
    x, w, c = _x(2, 3), _x(3, 5), _x(5)
    check_forward(hb.nn.xw_plus_b, [x, w, c], lambda a, m, c: a @ m + c)
    check_gradient(hb.nn.xw_plus_b, [x, w, c])


def test_bias_add_mismatch():
    """A bias not matching the last dimension names both shapes."""
    with hb.Graph().as_default():
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"\(3,\).*\(2, 4\)"):
            hb.nn.bias_add(hb.constant(np.zeros((2, 4))), hb.constant(np.zeros(3)))


def test_in_top_k():
    """in_top_k is True when fewer than k predictions beat the target's; ties count as in."""
    p = np.array([[0.1, 0.5, 0.4], [0.3, 0.3, 0.4], [0.9, 0.05, 0.05], [0.2, 0.2, np.nan]])
    t = np.array([2, 0, 1, 2], np.int32)

    def ref(k):
        return lambda a, b: np.array(
            [np.isfinite(a[i, b[i]]) and (a[i] > a[i, b[i]]).sum() < k for i in range(len(b))]
        )

    for k in (1, 2, 3):
        check_forward(lambda a, b, k=k: hb.nn.in_top_k(a, b, k), [p, t], ref(k))
    assert ref(1)(p, t).tolist() == [False, False, False, False]
    assert ref(2)(p, t).tolist() == [True, True, True, False]


def test_l2_normalize():
    """l2_normalize divides by the norm along an axis (or overall) with an epsilon floor."""
    x = _x(3, 4)
    check_forward(
        lambda t: hb.nn.l2_normalize(t, axis=1),
        [x],
        lambda v: v / np.sqrt((v**2).sum(1, keepdims=True)),
    )
    check_forward(hb.nn.l2_normalize, [x], lambda v: v / np.sqrt((v**2).sum()))
    check_forward(lambda t: hb.nn.l2_normalize(t, 0), [np.zeros((2, 2))], lambda v: v)
    check_gradient(lambda t: hb.nn.l2_normalize(t, axis=1), [x])


@pytest.mark.parametrize("keep", [False, True])
def test_moments(keep):
    """moments gives numpy's mean and population variance over axes; gradients check."""
    x = _x(2, 3, 4)
    check_forward(
        lambda t: list(hb.nn.moments(t, axes=[0, 1], keep_dims=keep)),
        [x],
        lambda v: [v.mean((0, 1), keepdims=keep), v.var((0, 1), keepdims=keep)],
    )
    check_gradient(lambda t: hb.nn.moments(t, [0, 2], keep_dims=keep)[1], [x])
    check_gradient(lambda t: hb.nn.moments(t, [1], keep_dims=keep)[0], [x])


def test_batch_normalization():
    """batch_normalization is scale * (x - mean) / sqrt(var + eps) + offset; gradients check."""
    x, m, v, o, s = _x(4, 3), _x(3), np.abs(_x(3)) + 0.5, _x(3), _x(3)

    def bn(*a):
        return hb.nn.batch_normalization(*a, variance_epsilon=1e-3)

    check_forward(bn, [x, m, v, o, s], lambda x, m, v, o, s: s * (x - m) / np.sqrt(v + 1e-3) + o)
    check_gradient(bn, [x, m, v, o, s])
    check_forward(
        lambda x, m, v: hb.nn.batch_normalization(x, m, v, None, None, 1e-3),
        [x, m, v],
        lambda x, m, v: (x - m) / np.sqrt(v + 1e-3),
    )


def _fbn_ref(x, scale, offset, eps=1e-3):
    axes = tuple(range(x.ndim - 1))
    m = x.mean(axes)
    v = x.var(axes)
    n = x.size // x.shape[-1]
    return [scale * (x - m) / np.sqrt(v + eps) + offset, m, v * n / (n - 1)]


def test_fused_batch_norm_training_forward():
    """Training: y uses batch stats; the returned variance is Bessel-corrected, as in TF."""
    x, s, o = _x(2, 3, 3, 4, scale=2.0) + 1.0, _x(4), _x(4)
    check_forward(lambda *a: list(hb.nn.fused_batch_norm(*a)), [x, s, o], _fbn_ref)
    x32 = [a.astype(np.float32) for a in (x, s, o)]
    check_forward(
        lambda *a: list(hb.nn.fused_batch_norm(*a)),
        x32,
        lambda *a: [r.astype(np.float32) for r in _fbn_ref(*a)],
        rtol=1e-4,
        atol=1e-5,
    )


def test_fused_batch_norm_inference_forward():
    """Inference: the given mean and variance normalize x and are returned unchanged."""
    x, s, o, m, v = _x(3, 2, 2, 4), _x(4), _x(4), _x(4), np.abs(_x(4)) + 0.1

    def build(x, s, o, m, v):
        return list(hb.nn.fused_batch_norm(x, s, o, m, v, epsilon=0.01, is_training=False))

    check_forward(
        build,
        [x, s, o, m, v],
        lambda x, s, o, m, v: [s * (x - m) / np.sqrt(v + 0.01) + o, m, v],
    )


def test_fused_batch_norm_gradients():
    """The analytic FusedBatchNormGrad matches finite differences, through y and the batch stats."""
    x, s, o = _x(2, 3, 2, 3), _x(3), _x(3)
    check_gradient(lambda *a: hb.nn.fused_batch_norm(*a)[0], [x, s, o])

    def all_outputs(x, s, o):
        y, m, v = hb.nn.fused_batch_norm(x, s, o)
        return y + m * 0.7 + v * 1.3

    check_gradient(all_outputs, [x, s, o])
    m, v = _x(3), np.abs(_x(3)) + 0.2

    def inference(x, s, o, m, v):
        y, bm, bv = hb.nn.fused_batch_norm(x, s, o, m, v, is_training=False)
        return y + bm * 0.5 - bv

    check_gradient(inference, [x, s, o, m, v])


def test_fused_batch_norm_errors():
    """Wrong-sized scale and missing inference statistics are reported."""
    with hb.Graph().as_default():
        x = hb.constant(np.zeros((2, 2, 2, 4), np.float32))
        with pytest.raises(
            hb.errors.InvalidArgumentError, match=r"scale has shape \(3,\) but x has 4"
        ):
            hb.nn.fused_batch_norm(x, hb.constant(np.ones(3, np.float32)))
        with pytest.raises(hb.errors.InvalidArgumentError, match="required"):
            hb.nn.fused_batch_norm(x, hb.constant(np.ones(4, np.float32)), is_training=False)


# ---- conv2d --------------------------------------------------------------------------------


def _same_pad(size, k, s):
    out = math.ceil(size / s)
    total = max((out - 1) * s + k - size, 0)
    return out, total // 2


def conv_ref(x, f, s, padding):
    """Direct-loop reference convolution (TF semantics: cross-correlation, SAME pads extra at the end)."""
    n, h, w, c = x.shape
    kh, kw, _, co = f.shape
    if padding == "SAME":
        ho, pt = _same_pad(h, kh, s)
        wo, pl = _same_pad(w, kw, s)
    else:
        ho, wo, pt, pl = (h - kh) // s + 1, (w - kw) // s + 1, 0, 0
    out = np.zeros((n, ho, wo, co))
    for i in range(ho):
        for j in range(wo):
            for a in range(kh):
                for b in range(kw):
                    r, q = i * s + a - pt, j * s + b - pl
                    if 0 <= r < h and 0 <= q < w:
                        out[:, i, j, :] += x[:, r, q, :] @ f[a, b]
    return out


CONV_CASES = [
    # (N, H, W, C, kh, kw, Co, stride, padding)
    (2, 7, 6, 3, 3, 3, 4, 1, "SAME"),
    (2, 7, 6, 3, 3, 3, 4, 1, "VALID"),
    (2, 7, 6, 3, 3, 2, 4, 2, "SAME"),
    (2, 7, 6, 3, 3, 2, 4, 2, "VALID"),
    (1, 8, 8, 2, 4, 4, 3, 2, "SAME"),
    (3, 5, 5, 4, 1, 1, 2, 1, "SAME"),
    (1, 5, 5, 3, 1, 1, 2, 2, "VALID"),
    (1, 4, 9, 1, 2, 5, 2, 3, "SAME"),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_forward_matches_naive(case):
    """conv2d equals a direct-loop convolution for SAME/VALID, strides 1-3 and odd sizes."""
    n, h, w, c, kh, kw, co, s, pad = case
    x, f = _x(n, h, w, c, dtype=np.float32), _x(kh, kw, c, co, dtype=np.float32)
    check_forward(
        lambda a, b: hb.nn.conv2d(a, b, strides=[1, s, s, 1], padding=pad),
        [x, f],
        lambda a, b: conv_ref(a.astype(np.float64), b.astype(np.float64), s, pad).astype(
            np.float32
        ),
        rtol=1e-4,
        atol=1e-5,
    )


@pytest.mark.parametrize("stride,pad", [(1, "SAME"), (2, "VALID"), (2, "SAME"), (1, "VALID")])
def test_conv2d_gradients(stride, pad):
    """Gradients w.r.t. input and filter (Conv2DBackpropInput/Filter) match finite differences."""
    x, f = _x(2, 5, 5, 2), _x(3, 3, 2, 3)
    check_gradient(lambda a, b: hb.nn.conv2d(a, b, [1, stride, stride, 1], pad), [x, f])


def test_conv2d_gradient_with_unknown_batch():
    """With an unknown batch size the backprop ops take the input shape at run time."""
    x, f = _x(2, 6, 5, 2), _x(3, 2, 2, 3)
    g = hb.Graph()
    with g.as_default():
        xp = hb.placeholder(hb.float64, [None, 6, 5, 2])
        fp = hb.placeholder(hb.float64, [3, 2, 2, 3])
        y = hb.nn.conv2d(xp, fp, [1, 2, 2, 1], "SAME")
        assert y.shape.as_list() == [None, 3, 3, 3]
        dy = _x(2, 3, 3, 3)
        gx, gf = hb.gradients(hb.reduce_sum(y * hb.constant(dy)), [xp, fp])
        assert gx.shape.as_list() == [None, 6, 5, 2] and gf.shape.as_list() == [3, 2, 2, 3]
        with hb.Session() as s:
            gxv, gfv = s.run([gx, gf], {xp: x, fp: f})
    # conv is linear: sum(dy * conv(x, f)) differentiates to conv_ref-based adjoints
    eps_x = np.zeros_like(x)
    eps_x[1, 2, 3, 1] = 1.0
    np.testing.assert_allclose(gxv[1, 2, 3, 1], (conv_ref(eps_x, f, 2, "SAME") * dy).sum())
    eps_f = np.zeros_like(f)
    eps_f[2, 1, 0, 2] = 1.0
    np.testing.assert_allclose(gfv[2, 1, 0, 2], (conv_ref(x, eps_f, 2, "SAME") * dy).sum())


def test_conv2d_backprop_public_functions():
    """conv2d_backprop_input/filter with static sizes agree with the autodiff gradients."""
    x, f, dy = _x(1, 5, 4, 2), _x(2, 3, 2, 2), _x(1, 3, 2, 2)
    g = hb.Graph()
    with g.as_default():
        xt, ft, dyt = hb.constant(x), hb.constant(f), hb.constant(dy)
        y = hb.nn.conv2d(xt, ft, [1, 2, 2, 1], "SAME")
        gx, gf = hb.gradients(hb.reduce_sum(y * dyt), [xt, ft])
        bi = hb.nn.conv2d_backprop_input([1, 5, 4, 2], ft, dyt, [1, 2, 2, 1], "SAME")
        bf = hb.nn.conv2d_backprop_filter(xt, [2, 3, 2, 2], dyt, [1, 2, 2, 1], "SAME")
        with hb.Session() as s:
            a, b, c, d = s.run([gx, gf, bi, bf])
    np.testing.assert_allclose(a, c)
    np.testing.assert_allclose(b, d)


def test_conv2d_errors():
    """Channel mismatch names both shapes; bad padding, NCHW, dilation and too-big VALID windows fail."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [2, 5, 5, 3])
        f = hb.constant(np.zeros((3, 3, 4, 8), np.float32))
        with pytest.raises(
            hb.errors.InvalidArgumentError, match=r"depth 3.*\(2, 5, 5, 3\).*4.*\(3, 3, 4, 8\)"
        ):
            hb.nn.conv2d(x, f, [1, 1, 1, 1], "SAME")
        f3 = hb.constant(np.zeros((3, 3, 3, 8), np.float32))
        with pytest.raises(hb.errors.InvalidArgumentError, match="'SAME' or 'VALID'.*'same'"):
            hb.nn.conv2d(x, f3, [1, 1, 1, 1], "same")
        with pytest.raises(hb.errors.InvalidArgumentError, match="depth 5"):  # NHWC read as NCHW
            hb.nn.conv2d(x, f3, [1, 1, 1, 1], "SAME", data_format="NCHW")
        with pytest.raises(hb.errors.UnimplementedError, match="NCDHW"):
            hb.nn.conv2d(x, f3, [1, 1, 1, 1], "SAME", data_format="NCDHW")
        with pytest.raises(hb.errors.InvalidArgumentError, match="dilations must be"):
            hb.nn.conv2d(x, f3, [1, 1, 1, 1], "SAME", dilations=[2, 2, 2, 1])  # WP3: 1 < rate OK
        with pytest.raises(hb.errors.InvalidArgumentError, match=r"\[1, h, w, 1\]"):
            hb.nn.conv2d(x, f3, [2, 1, 1, 1], "SAME")
        big = hb.constant(np.zeros((7, 7, 3, 1), np.float32))
        with pytest.raises(hb.errors.InvalidArgumentError, match="larger than the input"):
            hb.nn.conv2d(x, big, [1, 1, 1, 1], "VALID")


def test_conv2d_channel_mismatch_at_run_time():
    """When the depth is only known at run time, the kernel reports both shapes."""
    g = hb.Graph()
    with g.as_default():
        x = hb.placeholder(hb.float32, [1, 4, 4, None])
        y = hb.nn.conv2d(x, hb.constant(np.zeros((3, 3, 2, 1), np.float32)), 1, "SAME")
        with hb.Session() as s:
            with pytest.raises(
                hb.errors.InvalidArgumentError, match=r"\(1, 4, 4, 5\).*\(3, 3, 2, 1\)"
            ):
                s.run(y, {x: np.zeros((1, 4, 4, 5), np.float32)})


def test_conv2d_cost():
    """Conv2D and both backprop ops cost 2 * N * Ho * Wo * Co * kh * kw * Ci FLOPs."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [8, 32, 32, 16])
        f = hb.placeholder(hb.float32, [3, 3, 16, 32])
        y = hb.nn.conv2d(x, f, [1, 2, 2, 1], "SAME")
        gx, gf = hb.gradients(hb.reduce_sum(y), [x, f])
        want = 2 * 8 * 16 * 16 * 32 * 3 * 3 * 16
        for t in (y, gx, gf):
            op = t.op
            ins = [tuple(i.shape.as_list()) for i in op.inputs]
            outs = [tuple(o.shape.as_list()) for o in op.outputs]
            assert op.op_def.cost_fn(op, ins, outs).flops == want, op.type
        assert {gx.op.type, gf.op.type} == {"Conv2DBackpropInput", "Conv2DBackpropFilter"}


# ---- pooling -------------------------------------------------------------------------------


def pool_ref(x, k, s, padding, kind):
    """Direct-loop pooling; SAME windows see only real cells (max ignores, mean excludes padding)."""
    n, h, w, c = x.shape
    if padding == "SAME":
        ho, pt = _same_pad(h, k, s)
        wo, pl = _same_pad(w, k, s)
    else:
        ho, wo, pt, pl = (h - k) // s + 1, (w - k) // s + 1, 0, 0
    out = np.zeros((n, ho, wo, c), x.dtype)
    for i in range(ho):
        for j in range(wo):
            r0, q0 = i * s - pt, j * s - pl
            win = x[:, max(r0, 0) : r0 + k, max(q0, 0) : q0 + k, :]
            out[:, i, j] = win.max(axis=(1, 2)) if kind == "max" else win.mean(axis=(1, 2))
    return out


POOL_CASES = [
    (2, 3, 1, "SAME"),
    (2, 3, 1, "VALID"),
    (3, 3, 2, "SAME"),
    (3, 3, 2, "VALID"),
    (2, 2, 2, "VALID"),
    (2, 2, 2, "SAME"),
    (3, 3, 3, "SAME"),
]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("n,k,s,pad", POOL_CASES)
def test_pool_forward_matches_naive(kind, n, k, s, pad):
    """max_pool and avg_pool equal direct loops for SAME/VALID, strides 1-3 and odd sizes."""
    x = _x(n, 7, 5, 3, dtype=np.float32)
    fn = hb.nn.max_pool if kind == "max" else hb.nn.avg_pool
    check_forward(
        lambda a: fn(a, [1, k, k, 1], [1, s, s, 1], pad),
        [x],
        lambda a: pool_ref(a, k, s, pad, kind),
        rtol=1e-5,
    )


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("k,s,pad", [(3, 2, "SAME"), (2, 2, "VALID"), (3, 1, "SAME")])
def test_pool_gradients(kind, k, s, pad):
    """MaxPoolGrad and AvgPoolGrad match finite differences."""
    x = _x(2, 5, 4, 2)
    fn = hb.nn.max_pool if kind == "max" else hb.nn.avg_pool
    check_gradient(lambda a: fn(a, [1, k, k, 1], [1, s, s, 1], pad), [x])


def test_max_pool_gradient_ties_go_to_first():
    """With equal values in a window, the whole gradient goes to the first (row-major) one."""
    x = np.ones((1, 4, 4, 1), np.float32)
    g = hb.Graph()
    with g.as_default():
        xp = hb.placeholder(hb.float32, [1, 4, 4, 1])
        y = hb.nn.max_pool(xp, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        (gx,) = hb.gradients(
            hb.reduce_sum(
                y * hb.constant(np.arange(1.0, 5.0, dtype=np.float32).reshape(1, 2, 2, 1))
            ),
            [xp],
        )
        with hb.Session() as s:
            got = s.run(gx, {xp: x})[0, :, :, 0]
    want = np.zeros((4, 4), np.float32)
    want[0, 0], want[0, 2], want[2, 0], want[2, 2] = 1, 2, 3, 4
    np.testing.assert_array_equal(got, want)


def test_avg_pool_grad_of_grad():
    """AvgPoolGrad is linear; its gradient (an AvgPool) matches finite differences."""

    def grad_of(g):
        with hb.control_dependencies(None):
            x = hb.constant(np.zeros((1, 5, 5, 2)))
        y = hb.nn.avg_pool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME")
        (gx,) = hb.gradients(y, [x], grad_ys=[g])
        return gx

    check_gradient(grad_of, [_x(1, 3, 3, 2)])


def test_pool_errors_and_shapes():
    """Pool shapes follow TF's rule with unknown dims; bad ksize and padding are rejected."""
    with hb.Graph().as_default():
        x = hb.placeholder(hb.float32, [None, 7, None, 3])
        y = hb.nn.max_pool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME")
        assert y.shape.as_list() == [None, 4, None, 3]
        z = hb.nn.avg_pool(x, [1, 3, 3, 1], [1, 2, 2, 1], "VALID")
        assert z.shape.as_list() == [None, 3, None, 3]
        with pytest.raises(hb.errors.InvalidArgumentError, match="ksize"):
            hb.nn.max_pool(x, [2, 2, 2, 1], [1, 1, 1, 1], "SAME")
        with pytest.raises(hb.errors.InvalidArgumentError, match="padding"):
            hb.nn.avg_pool(x, [1, 2, 2, 1], [1, 1, 1, 1], "FULL")


def test_max_pool_integers():
    """max_pool works on int32 with SAME padding (padding never wins)."""
    x = RNG.integers(-9, 0, (1, 5, 5, 2)).astype(np.int32)
    check_forward(
        lambda a: hb.nn.max_pool(a, [1, 2, 2, 1], [1, 2, 2, 1], "SAME"),
        [x],
        lambda a: pool_ref(a, 2, 2, "SAME", "max"),
    )


# ---- dropout, embedding_lookup -------------------------------------------------------------


def test_dropout_values_and_gradient():
    """Dropout keeps about keep_prob of x scaled by 1/keep_prob; its gradient is mask/keep_prob."""
    x = RNG.uniform(1, 2, (200, 50)).astype(np.float32)
    g = hb.Graph()
    with g.as_default():
        hb.set_random_seed(1)
        xp = hb.placeholder(hb.float32, [None, 50])
        y = hb.nn.dropout(xp, keep_prob=0.7, seed=3)
        (gx,) = hb.gradients(hb.reduce_sum(y), [xp])
        with hb.Session() as s:
            yv, gv = s.run([y, gx], {xp: x})
            y2 = s.run(y, {xp: x})
    mask = yv != 0
    np.testing.assert_allclose(yv[mask], x[mask] / 0.7, rtol=1e-6)
    assert abs(mask.mean() - 0.7) < 0.02
    np.testing.assert_allclose(gv, mask / np.float32(0.7), rtol=1e-6)
    assert not np.array_equal(mask, y2 != 0)


def test_dropout_keep_prob_tensor_rate_and_noise_shape():
    """keep_prob may be a placeholder (1.0 = identity); rate = 1 - keep_prob; noise_shape broadcasts."""
    x = np.ones((6, 40), np.float32)
    g = hb.Graph()
    with g.as_default():
        kp = hb.placeholder(hb.float32, [])
        y = hb.nn.dropout(hb.constant(x), keep_prob=kp)
        z = hb.nn.dropout(hb.constant(x), rate=0.5, noise_shape=[6, 1])
        with hb.Session() as s:
            np.testing.assert_array_equal(s.run(y, {kp: 1.0}), x)
            zv = s.run(z)
    assert set(np.unique(zv)) <= {0.0, 2.0}
    assert all(len(set(row)) == 1 for row in zv)  # one decision per row
    with hb.Graph().as_default():
        t = hb.constant(x)
        assert hb.nn.dropout(t, keep_prob=1.0) is t
        with pytest.raises(ValueError, match=r"\(0, 1\]"):
            hb.nn.dropout(t, keep_prob=1.5)
        with pytest.raises(ValueError, match="exactly one"):
            hb.nn.dropout(t, keep_prob=0.5, rate=0.5)


def test_embedding_lookup():
    """embedding_lookup gathers rows of params; the params gradient scatters back (repeats add)."""
    params = _x(6, 3)
    ids = np.array([[4, 0], [4, 2]], np.int32)
    check_forward(hb.nn.embedding_lookup, [params, ids], lambda p, i: p[i])
    check_gradient(hb.nn.embedding_lookup, [params, ids], wrt=[0])
    with hb.Graph().as_default():
        p = hb.constant(params)
        np.testing.assert_array_equal(
            hb.Session().run(hb.nn.embedding_lookup([p], [1, 5])), params[[1, 5]]
        )
        np.testing.assert_array_equal(
            hb.Session().run(hb.nn.embedding_lookup([p, p], [0, 3])), params[[0, 1]]
        )
        with pytest.raises(hb.errors.UnimplementedError, match="max_norm"):
            hb.nn.embedding_lookup(p, [0], max_norm=1.0)


# ---- namespace -----------------------------------------------------------------------------


def test_nn_namespace():
    """hb.nn carries the tf.nn names; sigmoid and tanh are also top-level as in TF1."""
    names = """relu relu6 leaky_relu elu softplus sigmoid tanh softmax log_softmax
        softmax_cross_entropy_with_logits softmax_cross_entropy_with_logits_v2
        sparse_softmax_cross_entropy_with_logits sigmoid_cross_entropy_with_logits l2_loss
        bias_add xw_plus_b in_top_k l2_normalize moments conv2d max_pool avg_pool
        batch_normalization fused_batch_norm dropout embedding_lookup""".split()
    for n in names:
        assert callable(getattr(hb.nn, n)), n
    assert hb.sigmoid is hb.nn.sigmoid and hb.tanh is hb.nn.tanh
