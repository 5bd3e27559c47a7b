"""Initializers, variable scopes / get_variable, hb.losses and hb.layers."""

from __future__ import annotations

import math

import numpy as np
import pytest

import hetbed as hb


@pytest.fixture
def graph():
    g = hb.Graph()
    with g.as_default():
        yield g


def _run(fetches, feed=None):
    with hb.Session() as s:
        s.run(hb.global_variables_initializer())
        return s.run(fetches, feed)


# ---- initializers ---------------------------------------------------------------------------


def test_glorot_uniform_bounds_and_variance(graph):
    """glorot_uniform draws within ±sqrt(6/(fan_in+fan_out)) with variance limit²/3."""
    v = _run(hb.glorot_uniform_initializer(seed=3)([300, 500]))
    limit = math.sqrt(6.0 / 800)
    assert v.dtype == np.float32 and v.shape == (300, 500)
    assert np.abs(v).max() <= limit and np.abs(v).max() > 0.99 * limit
    assert v.var() == pytest.approx(limit**2 / 3, rel=0.02)
    assert abs(v.mean()) < 0.01 * limit


def test_variance_scaling_truncated_normal_std(graph):
    """variance_scaling(normal) has std sqrt(scale/n) after truncation at 2 sigma of the draw."""
    shape = [3, 3, 64, 128]  # conv kernel: fan_in = 9*64, fan_out = 9*128
    init = hb.variance_scaling_initializer(scale=2.0, mode="fan_in", distribution="normal", seed=1)
    v = _run(init(shape))
    want = math.sqrt(2.0 / (9 * 64))
    assert v.std() == pytest.approx(want, rel=0.02)
    assert np.abs(v).max() <= 2 * want / 0.87962566103423978 + 1e-6


def test_variance_scaling_modes_and_he(graph):
    """fan_avg uniform, untruncated normal and he_uniform give their closed-form variances."""
    avg = hb.initializers.variance_scaling(3.0, "fan_avg", "uniform", seed=2)([200, 600])
    unt = hb.initializers.variance_scaling(1.0, "fan_out", "untruncated_normal", seed=2)([400, 300])
    heu = hb.initializers.he_uniform(seed=4)([500, 200])
    a, u, h = _run([avg, unt, heu])
    assert a.var() == pytest.approx(3.0 / 400, rel=0.03)
    assert u.std() == pytest.approx(math.sqrt(1.0 / 300), rel=0.02)
    assert np.abs(h).max() <= math.sqrt(6.0 / 500)
    assert h.var() == pytest.approx(2.0 / 500, rel=0.03)


def test_simple_initializers(graph):
    """zeros, ones, constant (scalar and array), random_normal and truncated_normal statistics."""
    z = hb.zeros_initializer()([2, 3])
    o = hb.ones_initializer(dtype=hb.int32)([4])
    c = hb.constant_initializer(2.5)([2, 2], dtype=hb.float64)
    ca = hb.constant_initializer([1, 2, 3, 4])([2, 2])
    rn = hb.random_normal_initializer(1.0, 2.0, seed=5)([100000])
    tn = hb.truncated_normal_initializer(0.0, 0.5, seed=6)([100000])
    z, o, c, ca, rn, tn = _run([z, o, c, ca, rn, tn])
    np.testing.assert_array_equal(z, np.zeros((2, 3), np.float32))
    assert o.dtype == np.int32 and (o == 1).all()
    assert c.dtype == np.float64 and (c == 2.5).all()
    np.testing.assert_array_equal(ca, [[1, 2], [3, 4]])
    assert rn.mean() == pytest.approx(1.0, abs=0.03) and rn.std() == pytest.approx(2.0, rel=0.01)
    assert np.abs(tn).max() <= 1.0 and tn.std() == pytest.approx(0.5 * 0.8796, rel=0.02)


def test_initializer_errors_and_names(graph):
    """Bad arguments raise; initializers resolve from names; fans follow TF1's rule."""
    with pytest.raises(ValueError, match="mode"):
        hb.variance_scaling_initializer(mode="fan_max")
    with pytest.raises(ValueError, match="scale must be positive"):
        hb.variance_scaling_initializer(scale=0.0)
    with pytest.raises(ValueError, match="elements"):
        hb.constant_initializer([1, 2, 3])([2, 2])
    with pytest.raises(ValueError, match="unknown initializer 'nope'"):
        hb.initializers.get("nope")
    assert isinstance(hb.initializers.get("glorot_uniform"), hb.initializers.glorot_uniform)
    from hetbed.runtime.initializers import compute_fans

    assert compute_fans([5, 5, 3, 8]) == (75, 200)
    assert compute_fans([7]) == (7, 7)


def test_seeded_initializer_is_reproducible():
    """The same graph seed and initializer seed give the same values in a new graph."""

    def draw():
        with hb.Graph().as_default():
            hb.set_random_seed(11)
            return _run(hb.glorot_normal_initializer(seed=1)([20, 30]))

    np.testing.assert_array_equal(draw(), draw())


# ---- variable scopes and get_variable -----------------------------------------------------------


def test_get_variable_names_and_default_initializers(graph):
    """Names join the scopes; floats default to glorot_uniform, ints to zeros."""
    with hb.variable_scope("outer"):
        with hb.variable_scope("inner"):
            w = hb.get_variable("w", [50, 40])
        n = hb.get_variable("n", [3], dtype=hb.int32)
    assert w.name == "outer/inner/w:0" and n.name == "outer/n:0"
    assert w in hb.trainable_variables() and n in hb.global_variables()
    wv, nv = _run([w, n])
    assert np.abs(wv).max() <= math.sqrt(6 / 90) and wv.std() > 0.05
    np.testing.assert_array_equal(nv, [0, 0, 0])


def test_reuse_rules_and_messages(graph):
    """Re-creation is an error without reuse; reuse=True needs existence; AUTO_REUSE does both."""
    with hb.variable_scope("foo"):
        w = hb.get_variable("w", [2])
    with pytest.raises(
        ValueError, match=r"Variable foo/w already exists, disallowed\. Did you mean"
    ):
        with hb.variable_scope("foo"):
            hb.get_variable("w", [2])
    with hb.variable_scope("foo", reuse=True):
        assert hb.get_variable("w", [2]) is w
        assert hb.get_variable("w") is w
        with pytest.raises(ValueError, match="Variable foo/v does not exist"):
            hb.get_variable("v", [2])
        with pytest.raises(ValueError, match=r"specified shape \(3,\) and found shape \(2,\)"):
            hb.get_variable("w", [3])
        with pytest.raises(ValueError, match="specified dtype float64"):
            hb.get_variable("w", [2], dtype=hb.float64)
        with hb.variable_scope("sub", reuse=False):  # reuse is inherited; False cannot undo it
            assert hb.get_variable_scope().reuse is True
    for _ in range(2):
        with hb.variable_scope("auto", reuse=hb.AUTO_REUSE):
            a = hb.get_variable("a", [1])
    assert [v.name for v in hb.global_variables()] == ["foo/w:0", "auto/a:0"]
    assert a is hb.global_variables()[1]


def test_scope_objects_reuse_variables_and_name_scopes(graph):
    """Scope objects re-enter by absolute name; ops get a fresh name scope, vars keep the name."""
    with hb.variable_scope("net") as scope:
        w = hb.get_variable("w", [2])
        y1 = hb.multiply(w, 2.0)
    assert scope.name == "net" and y1.op.name == "net/Mul"
    with hb.variable_scope("other"):
        with hb.variable_scope(scope, reuse=True) as s2:
            assert s2.name == "net" and hb.get_variable("w") is w
    with hb.variable_scope(hb.get_variable_scope(), reuse=True):  # TF1's "reuse from here" idiom
        with hb.variable_scope("net"):
            assert hb.get_variable("w") is w
    assert hb.get_variable_scope().reuse is False
    with hb.variable_scope("net") as s3:
        s3.reuse_variables()
        y2 = hb.multiply(hb.get_variable("w"), 3.0)
    assert y2.op.name == "net_2/Mul"  # "net" was opened twice before
    with hb.variable_scope(None, default_name="block"):
        b0 = hb.get_variable("b", [1])
    with hb.variable_scope(None, default_name="block"):
        b1 = hb.get_variable("b", [1])
    assert (b0.name, b1.name) == ("block/b:0", "block_1/b:0")
    with pytest.raises(ValueError, match="default_name is required"):
        with hb.variable_scope(None):
            pass


def test_scope_initializer_regularizer_and_constant_initializers(graph):
    """Scope initializers are inherited; regularizers collect losses; constants fix the shape."""
    reg = lambda v: hb.multiply(hb.reduce_sum(hb.square(v)), 0.5)  # noqa: E731
    with hb.variable_scope("s", initializer=hb.constant_initializer(3.0)):
        with hb.variable_scope("t", regularizer=reg):
            a = hb.get_variable("a", [2])
        b = hb.get_variable("b", initializer=np.array([1.0, 2.0], np.float32))
        c = hb.get_variable("c", initializer=hb.constant([[1, 2]]))  # dtype from the tensor
    with pytest.raises(ValueError, match="do not specify shape"):
        hb.get_variable("d", [2], initializer=np.ones(2, np.float32))
    with pytest.raises(ValueError, match="must be fully defined"):
        hb.get_variable("e", [None, 2])
    (loss,) = hb.get_collection(hb.GraphKeys.REGULARIZATION_LOSSES)
    assert loss.op.name.startswith("s/t/a/Regularizer/")
    av, bv, cv, lv, total = _run([a, b, c, loss, hb.losses.get_regularization_loss()])
    np.testing.assert_array_equal(av, [3.0, 3.0])
    np.testing.assert_array_equal(bv, [1.0, 2.0])
    assert cv.dtype == np.int32 and cv.tolist() == [[1, 2]]
    assert lv == pytest.approx(9.0) and total == pytest.approx(9.0)


def test_custom_getter_and_local_variable(graph):
    """custom_getter wraps creation; get_local_variable is local and not trainable."""
    seen = []

    def getter(next_getter, name, *args, **kwargs):
        seen.append(name)
        return next_getter(name, *args, **kwargs)

    with hb.variable_scope("g", custom_getter=getter):
        hb.get_variable("w", [1])
    loc = hb.get_local_variable("counter", [], dtype=hb.int64)
    assert seen == ["g/w"]
    assert loc in hb.local_variables() and loc not in hb.trainable_variables()
    assert loc not in hb.global_variables()


# ---- layers -------------------------------------------------------------------------------


def test_dense_matches_numpy_and_names(graph):
    """dense equals relu(x @ W + b) on the fetched variables; names follow TF1 (dense, dense_1)."""
    x = hb.placeholder(hb.float32, [None, 6])
    y = hb.layers.dense(x, 4, activation=hb.nn.relu, bias_initializer=hb.constant_initializer(0.1))
    z = hb.layers.dense(y, 3, name="fc")
    z2 = hb.layers.dense(y, 3, name="fc")  # a new layer: TF1 makes the scope unique
    x3 = hb.placeholder(hb.float32, [None, 2, 6])
    y3 = hb.layers.dense(x3, 5, use_bias=False)
    names = [v.name for v in hb.global_variables()]
    assert names == [
        "dense/kernel:0",
        "dense/bias:0",
        "fc/kernel:0",
        "fc/bias:0",
        "fc_1/kernel:0",
        "fc_1/bias:0",
        "dense_1/kernel:0",
    ]
    assert y.shape.as_list() == [None, 4] and y3.shape.as_list() == [None, 2, 5]
    xv = np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32)
    x3v = np.random.default_rng(1).standard_normal((3, 2, 6)).astype(np.float32)
    W, b, Wf, bf, W3 = hb.global_variables()[:4] + hb.global_variables()[-1:]
    yv, zv, y3v, Wv, bv, Wfv, bfv, W3v = _run([y, z, y3, W, b, Wf, bf, W3], {x: xv, x3: x3v})
    np.testing.assert_allclose(bv, 0.1)
    np.testing.assert_allclose(yv, np.maximum(xv @ Wv + bv, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(zv, yv @ Wfv + bfv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y3v, x3v @ W3v, rtol=1e-5, atol=1e-6)
    assert z2.op.name.startswith("fc_1/")


def test_dense_on_inputs_whose_inner_dims_are_known_only_at_run_time(graph):
    """An RNN's outputs [batch, time, units] with both unknown: the last dim is enough, as in
    TF (the output's shape comes from the input's at run time); values and gradient vs numpy."""
    x = hb.placeholder(hb.float32, [None, None, 5])
    y = hb.layers.dense(x, 3)
    assert y.shape.as_list() == [None, None, 3]
    (g,) = hb.gradients(hb.reduce_sum(y * y), [x])
    xv = np.random.default_rng(2).standard_normal((2, 4, 5)).astype(np.float32)
    yv, gv, W, b = _run([y, g, *hb.trainable_variables()], {x: xv})
    want = xv @ W + b
    np.testing.assert_allclose(yv, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gv, 2 * want @ W.T, rtol=1e-4, atol=1e-5)


def test_layer_sharing(graph):
    """reuse=True with a name, a layer object called twice, and scope re-entry share variables."""
    x = hb.placeholder(hb.float32, [None, 3])
    a = hb.layers.dense(x, 2, name="shared")
    b = hb.layers.dense(x, 2, name="shared", reuse=True)
    layer = hb.layers.Dense(2)
    c, d = layer(x), layer(x)
    for reuse in (None, True):
        with hb.variable_scope("tower", reuse=reuse):
            hb.layers.dense(x, 2)
    names = [v.name for v in hb.global_variables()]
    assert names == [
        "shared/kernel:0",
        "shared/bias:0",
        "dense/kernel:0",
        "dense/bias:0",
        "tower/dense/kernel:0",
        "tower/dense/bias:0",
    ]
    assert layer.trainable_variables == hb.global_variables()[2:4]
    av, bv, cv, dv = _run([a, b, c, d], {x: np.ones((1, 3), np.float32)})
    np.testing.assert_array_equal(av, bv)
    np.testing.assert_array_equal(cv, dv)
    with pytest.raises(ValueError, match="last dimension of the inputs to Dense"):
        hb.layers.dense(hb.placeholder(hb.float32, [2, None]), 3)


def test_conv2d_pool_flatten_match_nn(graph):
    """conv2d equals nn.conv2d + bias on its kernel; pooling and flatten equal the nn/numpy forms."""
    img = hb.placeholder(hb.float32, [None, 9, 9, 3])
    c = hb.layers.conv2d(img, 4, (3, 2), strides=2, padding="same", activation=hb.nn.relu)
    conv = hb.get_variable_scope()  # root
    kernel, bias = [v for v in hb.global_variables() if v.name.startswith("conv2d/")]
    assert kernel.shape.as_list() == [3, 2, 3, 4] and conv.name == ""
    ref = hb.nn.relu(hb.nn.conv2d(img, kernel, [1, 2, 2, 1], "SAME") + bias)
    mp = hb.layers.max_pooling2d(c, 2, 2)
    ap = hb.layers.average_pooling2d(c, 2, 1, padding="same")
    ref_ap = hb.nn.avg_pool(c, [1, 2, 2, 1], [1, 1, 1, 1], "SAME")
    flat = hb.layers.flatten(mp)
    assert c.shape.as_list() == [None, 5, 5, 4] and flat.shape.as_list() == [None, 16]
    xv = np.random.default_rng(2).standard_normal((2, 9, 9, 3)).astype(np.float32)
    cv, rv, mv, av, rav, fv = _run([c, ref, mp, ap, ref_ap, flat], {img: xv})
    np.testing.assert_allclose(cv, rv, rtol=1e-6)
    np.testing.assert_allclose(mv, cv[:, :4, :4].reshape(2, 2, 2, 2, 2, 4).max(axis=(2, 4)))
    np.testing.assert_allclose(av, rav)
    np.testing.assert_array_equal(fv, mv.reshape(2, -1))
    with pytest.raises(ValueError, match="channels_last"):
        hb.layers.conv2d(img, 4, 3, data_format="channels_first")


def test_dropout_training_switch(graph):
    """dropout is the identity unless training; a bool tensor picks the mode when run."""
    x = hb.ones([200, 100])
    flag = hb.placeholder_with_default(False, [])
    off = hb.layers.dropout(x, 0.3)
    on = hb.layers.dropout(x, 0.3, training=True, seed=1)
    sw = hb.layers.dropout(x, 0.3, training=flag, seed=1)
    with hb.Session() as s:
        offv, onv, sw_off = s.run([off, on, sw])
        sw_on = s.run(sw, {flag: True})
    np.testing.assert_array_equal(offv, 1.0)
    np.testing.assert_array_equal(sw_off, 1.0)
    for v in (onv, sw_on):
        kept = v[v != 0]
        np.testing.assert_allclose(kept, 1 / 0.7, rtol=1e-6)
        assert (v == 0).mean() == pytest.approx(0.3, abs=0.02)


def _bn_reference(x, axes, eps):
    m = x.mean(axis=axes)
    v = x.var(axis=axes)
    return m, v, (x - m) / np.sqrt(v + eps)


@pytest.mark.parametrize("shape", [(32, 5), (4, 3, 3, 2)])
def test_batch_norm_training_inference_and_updates(graph, shape):
    """Training normalizes with batch stats; UPDATE_OPS move the averages; inference uses them."""
    x = hb.placeholder(hb.float32, shape)
    flag = hb.placeholder(hb.bool_, [])
    y_train = hb.layers.batch_normalization(x, training=True, momentum=0.9, name="bn")
    y_infer = hb.layers.batch_normalization(x, training=False, name="bn", reuse=True)
    y_flag = hb.layers.batch_normalization(x, training=flag, name="bn", reuse=True, momentum=0.9)
    updates = hb.get_collection(hb.GraphKeys.UPDATE_OPS)
    assert len(updates) == 4  # two from the training layer, two from the switched one
    mm, mv = [v for v in hb.global_variables() if "moving" in v.name]
    assert mm not in hb.trainable_variables()
    rng = np.random.default_rng(3)
    xv = (rng.standard_normal(shape) * 3 + 2).astype(np.float32)
    axes = tuple(range(len(shape) - 1))
    n = int(np.prod(shape[:-1]))
    bm, bvar, want = _bn_reference(xv.astype(np.float64), axes, 1e-3)
    # TF1: the fused (4-D) path updates the moving variance with the unbiased batch variance
    bvar_upd = bvar * n / (n - 1) if len(shape) == 4 else bvar
    with hb.Session() as s:
        s.run(hb.global_variables_initializer())
        got = s.run(y_train, {x: xv})
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        inf0 = s.run(y_infer, {x: xv})
        np.testing.assert_allclose(inf0, xv / np.sqrt(1 + 1e-3), rtol=1e-5)
        s.run(updates[:2], {x: xv})
        np.testing.assert_allclose(s.run(mm), 0.1 * bm, rtol=1e-5)
        np.testing.assert_allclose(s.run(mv), 0.9 + 0.1 * bvar_upd, rtol=1e-5)
        mmv, mvv = s.run([mm, mv])
        want_inf = (xv - mmv) / np.sqrt(mvv + 1e-3)
        np.testing.assert_allclose(s.run(y_infer, {x: xv}), want_inf, rtol=1e-4, atol=1e-5)
        # the switched layer: inference when False (and its updates change nothing)
        np.testing.assert_allclose(
            s.run(y_flag, {x: xv, flag: False}), want_inf, rtol=1e-4, atol=1e-5
        )
        s.run(updates[2:], {x: xv, flag: False})
        np.testing.assert_allclose(s.run(mm), mmv)
        np.testing.assert_allclose(s.run(y_flag, {x: xv, flag: True}), want, rtol=1e-4, atol=1e-4)
        s.run(updates[2:], {x: xv, flag: True})
        np.testing.assert_allclose(s.run(mm), 0.9 * mmv + 0.1 * bm, rtol=1e-5)


def test_batch_norm_gradient_matches_finite_differences(graph):
    """The gradient through training-mode batch norm (composite path) matches central differences."""
    x = hb.placeholder(hb.float64, [6, 3])
    y = hb.layers.batch_normalization(
        x, training=True, gamma_initializer=hb.constant_initializer(1.5, dtype=hb.float64)
    )
    w = np.random.default_rng(4).standard_normal((6, 3))
    loss = hb.reduce_sum(y * hb.constant(w) * hb.constant(w))
    (gx,) = hb.gradients(loss, [x])
    xv = np.random.default_rng(5).standard_normal((6, 3))
    with hb.Session() as s:
        s.run(hb.global_variables_initializer())
        got = s.run(gx, {x: xv})
        num = np.zeros_like(xv)
        for idx in np.ndindex(*xv.shape):
            d = np.zeros_like(xv)
            d[idx] = 1e-6
            num[idx] = (s.run(loss, {x: xv + d}) - s.run(loss, {x: xv - d})) / 2e-6
    np.testing.assert_allclose(got, num, rtol=1e-5, atol=1e-6)


# ---- losses -------------------------------------------------------------------------------


def test_losses_values_and_reductions(graph):
    """Each loss equals its numpy form; weights use SUM_BY_NONZERO_WEIGHTS by default."""
    rng = np.random.default_rng(6)
    p = rng.standard_normal((4, 3)).astype(np.float32)
    y = rng.standard_normal((4, 3)).astype(np.float32)
    w = np.array([[1.0], [0.0], [2.0], [0.0]], np.float32)
    logits = rng.standard_normal((4, 5)).astype(np.float32)
    labels = np.array([0, 3, 4, 1])
    onehot = np.eye(5, dtype=np.float32)[labels]
    bin_labels = (rng.random((4, 3)) > 0.5).astype(np.float32)
    L = hb.losses
    R = L.Reduction
    t = {
        "mse": L.mean_squared_error(y, p),
        "mse_w": L.mean_squared_error(y, p, weights=w),
        "mse_sum": L.mean_squared_error(y, p, weights=2.0, reduction=R.SUM),
        "mse_mean": L.mean_squared_error(y, p, weights=w, reduction=R.MEAN),
        "mse_none": L.mean_squared_error(y, p, reduction=R.NONE),
        "abs": L.absolute_difference(y, p),
        "sparse": L.sparse_softmax_cross_entropy(labels, logits),
        "sparse_w": L.sparse_softmax_cross_entropy(labels, logits, weights=w[:, 0]),
        "softmax": L.softmax_cross_entropy(onehot, logits),
        "smooth": L.softmax_cross_entropy(onehot, logits, label_smoothing=0.1),
        "sigmoid": L.sigmoid_cross_entropy(bin_labels, p),
        "hinge": L.hinge_loss(bin_labels, p),
        "huber": L.huber_loss(y, p, delta=0.5),
        "zero": L.mean_squared_error(y, p, weights=0.0),
    }
    got = _run(t)
    sq = (p - y) ** 2
    lsm = logits - logits.max(1, keepdims=True)
    lsm = lsm - np.log(np.exp(lsm).sum(1, keepdims=True))
    ce = -lsm[np.arange(4), labels]
    smooth = onehot * 0.9 + 0.1 / 5
    err = np.abs(p - y)
    huber = np.where(err <= 0.5, 0.5 * err**2, 0.5 * (err - 0.25))
    want = {
        "mse": sq.mean(),
        "mse_w": (sq * w).sum() / 6,  # six non-zero broadcast weights
        "mse_sum": 2 * sq.sum(),
        "mse_mean": (sq * w).sum() / (w.sum() * 3),
        "mse_none": sq,
        "abs": err.mean(),
        "sparse": ce.mean(),
        "sparse_w": (ce * w[:, 0]).sum() / 2,
        "softmax": ce.mean(),
        "smooth": -(smooth * lsm).sum(1).mean(),
        "sigmoid": (np.maximum(p, 0) - p * bin_labels + np.log1p(np.exp(-np.abs(p)))).mean(),
        "hinge": np.maximum(0, 1 - (2 * bin_labels - 1) * p).mean(),
        "huber": huber.mean(),
        "zero": 0.0,
    }
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6, err_msg=k)
    assert len(L.get_losses()) == len(t)
    with pytest.raises(ValueError, match="invalid reduction 'mean'"):
        L.mean_squared_error(y, p, reduction="mean")


def test_total_loss_adds_regularization(graph):
    """get_total_loss sums LOSSES and REGULARIZATION_LOSSES; with none it raises."""
    with pytest.raises(ValueError, match="no losses found"):
        hb.losses.get_total_loss()
    x = hb.constant(np.ones((2, 3), np.float32))
    y = hb.layers.dense(
        x,
        1,
        kernel_initializer=hb.ones_initializer(),
        kernel_regularizer=lambda w: hb.multiply(hb.reduce_sum(w), 0.1),
    )
    mse = hb.losses.mean_squared_error(hb.zeros([2, 1]), y)
    total = hb.losses.get_total_loss()
    assert _run(mse) == pytest.approx(9.0)
    assert _run(total) == pytest.approx(9.3)
