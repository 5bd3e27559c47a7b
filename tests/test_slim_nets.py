"""tf.contrib.slim.nets: alexnet, overfeat, vgg, inception v1-v3, resnet v1/v2 and resnet_utils.
Without TensorFlow: the import paths, output shapes, end points, variable counts and names (TF's
numbers, taken from TF-Slim's nets), the ResNet pieces against numpy and against their own
output_stride rule. With TensorFlow and tf_slim installed: every net's variables (names and
shapes) and end points equal TF-Slim's, and with TF's initial values copied in (batch norm
statistics made random), every end point's values equal TF's to 1e-4 of their scale."""

from __future__ import annotations

import numpy as np
import pytest

import hetbed.compat.v1 as tf

slim = tf.contrib.slim
nets = slim.nets


@pytest.fixture(autouse=True)
def _fresh_graph():
    with tf.Graph().as_default():
        yield


def _variables() -> dict:
    return {v.op.name: tuple(v.shape.as_list()) for v in tf.global_variables()}


# ---- import paths --------------------------------------------------------------------------


def test_tf1_import_paths_of_nets():
    """``import tensorflow.contrib.slim.nets``, ``from tensorflow.contrib.slim.nets import
    resnet_v1``, the ``contrib.slim.python.slim.nets`` paths: the same modules as
    ``slim.nets``'s attributes."""
    import hetbed.compat.v1.contrib.slim.nets as nets_mod
    import hetbed.compat.v1.contrib.slim.python.slim.nets.resnet_v2 as r2
    from hetbed.compat.v1.contrib.slim.nets import alexnet, inception, resnet_v1, vgg
    from hetbed.compat.v1.contrib.slim.python.slim.nets import resnet_utils

    assert nets_mod is nets and r2 is nets.resnet_v2 and resnet_utils is nets.resnet_utils
    assert (alexnet, inception, resnet_v1, vgg) == (
        nets.alexnet,
        nets.inception,
        nets.resnet_v1,
        nets.vgg,
    )
    assert nets.inception.inception_v3_arg_scope is nets.inception_v3.inception_v3_arg_scope
    assert nets.vgg.vgg_d is nets.vgg.vgg_16 and nets.vgg.vgg_e is nets.vgg.vgg_19
    assert nets.resnet_v1.resnet_v1_50.default_image_size == 224
    assert nets.inception.inception_v3.default_image_size == 299


# ---- shapes, end points and variables (TF-Slim's) ------------------------------------------

# (net, arg scope, input size, extra arguments, output shape, end points, variables)
_BUILDS = {
    "alexnet_v2": ("alexnet.alexnet_v2", "alexnet.alexnet_v2_arg_scope", 224, {}, (2, 7), 11, 16),
    "overfeat": ("overfeat.overfeat", "overfeat.overfeat_arg_scope", 231, {}, (2, 7), 11, 16),
    "vgg_a": ("vgg.vgg_a", "vgg.vgg_arg_scope", 224, {}, (2, 7), 16, 22),
    "vgg_16": ("vgg.vgg_16", "vgg.vgg_arg_scope", 224, {}, (2, 7), 21, 32),
    "vgg_19": ("vgg.vgg_19", "vgg.vgg_arg_scope", 224, {}, (2, 7), 24, 38),
    "inception_v1": (
        "inception.inception_v1",
        "inception.inception_v1_arg_scope",
        224,
        {},
        (2, 7),
        18,
        230,
    ),
    "inception_v2": (
        "inception.inception_v2",
        "inception.inception_v2_arg_scope",
        224,
        {},
        (2, 7),
        17,
        277,
    ),
    "inception_v3": (
        "inception.inception_v3",
        "inception.inception_v3_arg_scope",
        299,
        {},
        (2, 7),
        22,
        388,
    ),
    "resnet_v1_50": (
        "resnet_v1.resnet_v1_50",
        "resnet_v1.resnet_arg_scope",
        64,
        {},
        (2, 1, 1, 7),
        75,
        267,
    ),
    "resnet_v2_101": (
        "resnet_v2.resnet_v2_101",
        "resnet_v2.resnet_arg_scope",
        64,
        {},
        (2, 1, 1, 7),
        143,
        544,
    ),
}


def _lookup(path: str, root=None):
    mod, fn = path.split(".")
    return getattr(getattr(root or nets, mod), fn)


def _build(name: str, x, num_classes: int = 7, is_training=False, root=None, arg_scope=None):
    fn, scope_fn, _, kwargs, *_ = _BUILDS.get(name) or _EXTRA[name]
    with (arg_scope or slim.arg_scope)(_lookup(scope_fn, root)()):
        return _lookup(fn, root)(x, num_classes, is_training=is_training, **kwargs)


@pytest.mark.parametrize("name", list(_BUILDS))
def test_net_builds_with_tf_slims_shapes_and_counts(name):
    _, _, size, _, out_shape, n_end, n_vars = _BUILDS[name]
    x = tf.placeholder(tf.float32, [2, size, size, 3])
    net, end_points = _build(name, x)
    assert tuple(net.shape.as_list()) == out_shape
    assert len(end_points) == n_end
    assert len(tf.global_variables()) == n_vars


def test_variable_names_restore_tf_checkpoints_by_name():
    """A few of TF's checkpoint names and shapes, one net at a time."""
    expected = {
        "resnet_v1_50": {
            "resnet_v1_50/conv1/weights": (7, 7, 3, 64),
            "resnet_v1_50/conv1/BatchNorm/gamma": (64,),
            "resnet_v1_50/block1/unit_1/bottleneck_v1/conv1/weights": (1, 1, 64, 64),
            "resnet_v1_50/block1/unit_1/bottleneck_v1/shortcut/weights": (1, 1, 64, 256),
            "resnet_v1_50/block4/unit_3/bottleneck_v1/conv3/BatchNorm/moving_variance": (2048,),
            "resnet_v1_50/logits/biases": (7,),
        },
        "resnet_v2_101": {
            "resnet_v2_101/conv1/biases": (64,),
            "resnet_v2_101/block3/unit_23/bottleneck_v2/preact/beta": (1024,),
            "resnet_v2_101/postnorm/moving_mean": (2048,),
        },
        "inception_v3": {
            "InceptionV3/Mixed_5b/Branch_1/Conv2d_0b_5x5/weights": (5, 5, 48, 64),
            "InceptionV3/Mixed_5c/Branch_1/Conv_1_0c_5x5/weights": (5, 5, 48, 64),
            "InceptionV3/Mixed_7b/Branch_1/Conv2d_0b_3x1/weights": (3, 1, 384, 384),
            "InceptionV3/AuxLogits/Conv2d_2a_5x5/weights": (5, 5, 128, 768),
            "InceptionV3/Logits/Conv2d_1c_1x1/weights": (1, 1, 2048, 7),
        },
        "inception_v2": {
            "InceptionV2/Conv2d_1a_7x7/depthwise_weights": (7, 7, 3, 8),
            "InceptionV2/Conv2d_1a_7x7/pointwise_weights": (1, 1, 24, 64),
            "InceptionV2/Mixed_5c/Branch_3/Conv2d_0b_1x1/BatchNorm/beta": (128,),
        },
        "inception_v1": {
            "InceptionV1/Mixed_5b/Branch_2/Conv2d_0a_3x3/weights": (3, 3, 32, 128),
            "InceptionV1/Logits/Conv2d_0c_1x1/biases": (7,),
        },
        "vgg_16": {
            "vgg_16/conv1/conv1_1/biases": (64,),
            "vgg_16/conv5/conv5_3/weights": (3, 3, 512, 512),
            "vgg_16/fc6/weights": (7, 7, 512, 4096),
            "vgg_16/fc8/weights": (1, 1, 4096, 7),
        },
        "alexnet_v2": {"alexnet_v2/conv1/weights": (11, 11, 3, 64)},
        "overfeat": {"overfeat/fc6/weights": (6, 6, 1024, 3072)},
    }
    for name, names in expected.items():
        with tf.Graph().as_default():
            size = _BUILDS[name][2]
            _build(name, tf.placeholder(tf.float32, [1, size, size, 3]))
            got = _variables()
            assert {k: got.get(k) for k in names} == names, name


def test_end_point_names():
    x = tf.placeholder(tf.float32, [1, 64, 64, 3])
    with slim.arg_scope(nets.resnet_v1.resnet_arg_scope()):
        net, ep = nets.resnet_v1.resnet_v1_50(x, 5, is_training=False)
    assert {
        "resnet_v1_50/conv1",
        "resnet_v1_50/block1/unit_1/bottleneck_v1/shortcut",
        "resnet_v1_50/block1/unit_1/bottleneck_v1/conv3",
        "resnet_v1_50/block1/unit_1/bottleneck_v1",
        "resnet_v1_50/block4",
        "resnet_v1_50/logits",
        "predictions",
    } <= set(ep)
    assert ep["resnet_v1_50/logits"] is net
    assert ep["resnet_v1_50/block1"].shape.as_list() == [1, 8, 8, 256]  # stride 2 at the end
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [1, 224, 224, 3])
        _, ep = nets.vgg.vgg_16(x, 5, is_training=False)
        assert list(ep)[:3] == ["vgg_16/conv1/conv1_1", "vgg_16/conv1/conv1_2", "vgg_16/pool1"]
        assert ep["vgg_16/fc8"].shape.as_list() == [1, 5]  # the squeezed logits
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [1, 299, 299, 3])
        _, ep = nets.inception.inception_v3(x, 5, is_training=False)
        assert list(ep)[-4:] == ["AuxLogits", "PreLogits", "Logits", "Predictions"]
        assert ep["Mixed_6e"].shape.as_list() == [1, 17, 17, 768]
        assert ep["Mixed_7c"].shape.as_list() == [1, 8, 8, 2048]
        # create_aux_logits (tf_slim's; after scope, so TF1's positional calls still work)
        _, ep = nets.inception.inception_v3(
            x, 5, False, 0.8, 16, 1.0, slim.softmax, True, None, "NoAux", create_aux_logits=False
        )
        assert "AuxLogits" not in ep
        assert not [v for v in tf.global_variables() if v.op.name.startswith("NoAux/AuxLogits")]


def test_bases_stop_at_final_endpoint_and_refuse_unknown_ones():
    x = tf.placeholder(tf.float32, [1, 224, 224, 3])
    net, ep = nets.inception.inception_v1_base(x, final_endpoint="Mixed_3c")
    assert list(ep)[-1] == "Mixed_3c" and net.shape.as_list() == [1, 28, 28, 480]
    net, ep = nets.inception.inception_v2_base(x, "Mixed_4a", depth_multiplier=0.5, scope="V2")
    assert net.shape.as_list() == [1, 14, 14, 288]  # 80 + 48 + the 160 passed through
    with pytest.raises(ValueError, match="Unknown final endpoint"):
        nets.inception.inception_v3_base(x, final_endpoint="Mixed_9z")
    with pytest.raises(ValueError, match="depth_multiplier"):
        nets.inception.inception_v3(x, depth_multiplier=0)


def test_resnet_options_global_pool_output_stride_reuse():
    x = tf.placeholder(tf.float32, [1, 65, 65, 3])
    with slim.arg_scope(nets.resnet_v2.resnet_arg_scope()):
        net, _ = nets.resnet_v2.resnet_v2_50(x, None, global_pool=False, output_stride=8)
        assert net.shape.as_list() == [1, 9, 9, 2048]
        n_vars = len(tf.global_variables())
        net2, _ = nets.resnet_v2.resnet_v2_50(x, None, global_pool=False, reuse=True)
        assert net2.shape.as_list() == [1, 3, 3, 2048]
        assert len(tf.global_variables()) == n_vars
        with pytest.raises(ValueError, match="multiple of 4"):
            nets.resnet_v2.resnet_v2_50(x, None, output_stride=6, scope="other")


# ---- the ResNet pieces against numpy and against themselves --------------------------------


def _np_conv(x, w, stride, pad_before, pad_after, rate=1):
    """A VALID convolution of ``x`` padded with zeros, NHWC / HWIO."""
    x = np.pad(x, [(0, 0), (pad_before, pad_after), (pad_before, pad_after), (0, 0)])
    kh, kw, _, cout = w.shape
    eh, ew = (kh - 1) * rate + 1, (kw - 1) * rate + 1
    oh = (x.shape[1] - eh) // stride + 1
    ow = (x.shape[2] - ew) // stride + 1
    out = np.zeros((x.shape[0], oh, ow, cout))
    for i in range(kh):
        for j in range(kw):
            patch = x[
                :,
                i * rate : i * rate + (oh - 1) * stride + 1 : stride,
                j * rate : j * rate + (ow - 1) * stride + 1 : stride,
            ]
            out += patch @ w[i, j]
    return out


def test_conv2d_same_and_a_v1_bottleneck_against_numpy():
    """``conv2d_same`` of stride 2 pads (1, 1) for a 3x3 kernel whatever the input's parity, a
    v1 bottleneck is ``relu(shortcut + conv3(conv2(conv1(x))))`` (no arg scope: biases, ReLU
    inside)."""
    rng = np.random.default_rng(0)
    xv = rng.normal(size=(2, 6, 6, 4)).astype(np.float32)
    x = tf.constant(xv)
    same = nets.resnet_utils.conv2d_same(x, 3, 3, stride=2, scope="same")
    unit = nets.resnet_v1.bottleneck(x, depth=8, depth_bottleneck=2, stride=2, scope="unit")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        v = {k.op.name: sess.run(k) for k in tf.global_variables()}
        got_same, got_unit = sess.run([same, unit])
    want_same = np.maximum(_np_conv(xv, v["same/weights"], 2, 1, 1) + v["same/biases"], 0)
    np.testing.assert_allclose(got_same, want_same, rtol=1e-5, atol=1e-5)
    shortcut = _np_conv(xv, v["unit/shortcut/weights"], 2, 0, 0) + v["unit/shortcut/biases"]
    r = np.maximum(_np_conv(xv, v["unit/conv1/weights"], 1, 0, 0) + v["unit/conv1/biases"], 0)
    r = np.maximum(_np_conv(r, v["unit/conv2/weights"], 2, 1, 1) + v["unit/conv2/biases"], 0)
    r = _np_conv(r, v["unit/conv3/weights"], 1, 0, 0) + v["unit/conv3/biases"]
    np.testing.assert_allclose(got_unit, np.maximum(shortcut + r, 0), rtol=1e-4, atol=1e-5)


def test_stack_blocks_dense_output_stride_subsamples_the_nominal_output():
    """With ``output_stride`` the units after that stride run dilated: the dense output,
    subsampled, equals the nominal one (same variables); an unreachable stride is an error."""
    block = nets.resnet_v1.resnet_v1_block
    blocks = [block("block1", 2, 2, 2), block("block2", 4, 2, 2), block("block3", 4, 2, 1)]
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(size=(1, 9, 9, 3)).astype(np.float32))
    with tf.variable_scope("net"):
        nominal = nets.resnet_utils.stack_blocks_dense(x, blocks)
    dense = {}
    for stride in (1, 2):
        with tf.variable_scope("net", reuse=True):
            dense[stride] = nets.resnet_utils.stack_blocks_dense(x, blocks, output_stride=stride)
    assert nominal.shape.as_list() == [1, 3, 3, 16]
    assert dense[1].shape.as_list() == [1, 9, 9, 16]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        a, b1, b2 = sess.run([nominal, dense[1], dense[2]])
    np.testing.assert_allclose(b1[:, ::4, ::4], a, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b2[:, ::2, ::2], a, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="cannot be reached"):
        with tf.variable_scope("net", reuse=True):
            nets.resnet_utils.stack_blocks_dense(x, blocks, output_stride=3)


def test_tuple_units_as_older_tf_and_collected_outputs():
    """``Block`` args as ``(depth, depth_bottleneck, stride)`` tuples; the blocks and units are
    collected into ``outputs_collections`` under their scope names."""
    unit = nets.resnet_v2.bottleneck
    blocks = [nets.resnet_utils.Block("b", unit, [(8, 2, 1), (8, 2, 2)])]
    x = tf.placeholder(tf.float32, [1, 8, 8, 8])
    with slim.arg_scope([unit, nets.resnet_utils.stack_blocks_dense], outputs_collections="ep"):
        out = nets.resnet_utils.stack_blocks_dense(x, blocks)
    ep = slim.utils.convert_collection_to_dict("ep")
    assert list(ep) == ["b/unit_1/bottleneck_v2", "b/unit_2/bottleneck_v2", "b"]
    assert ep["b"] is out and out.shape.as_list() == [1, 4, 4, 8]


def test_a_small_resnet_trains_with_its_batch_norm_updates():
    """A two-block v1 ResNet in training mode: three steps lower the loss and the moving means
    (UPDATE_OPS) move; inception_v1's arg scope puts two updates and two moving statistics
    (in ``moving_vars``) per batch norm."""
    blocks = [
        nets.resnet_v1.resnet_v1_block("block1", base_depth=4, num_units=2, stride=2),
        nets.resnet_v1.resnet_v1_block("block2", base_depth=8, num_units=1, stride=1),
    ]
    x = tf.placeholder(tf.float32, [4, 32, 32, 3])
    y = tf.constant([0, 1, 2, 1])
    with slim.arg_scope(nets.resnet_v1.resnet_arg_scope()):
        logits, end_points = nets.resnet_v1.resnet_v1(x, blocks, 3, scope="tiny")
    assert logits.shape.as_list() == [4, 1, 1, 3]
    assert end_points["tiny/block1"].shape.as_list() == [4, 4, 4, 16]
    loss = tf.losses.sparse_softmax_cross_entropy(y, tf.squeeze(logits, [1, 2]))
    with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    mean = [v for v in tf.global_variables() if v.op.name == "tiny/conv1/BatchNorm/moving_mean"]
    xv = np.random.default_rng(2).uniform(size=(4, 32, 32, 3)).astype(np.float32)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        before = sess.run(loss, {x: xv})
        for _ in range(3):
            sess.run(train, {x: xv})
        assert sess.run(loss, {x: xv}) < before
        assert np.abs(sess.run(mean[0])).max() > 0
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [1, 224, 224, 3])
        with slim.arg_scope(nets.inception.inception_v1_arg_scope()):
            nets.inception.inception_v1(x, 3)
        assert len(tf.get_collection(tf.GraphKeys.UPDATE_OPS)) == 2 * 57
        assert len(tf.get_collection("moving_vars")) == 2 * 57


# ---- against TF-Slim -----------------------------------------------------------------------

# nets compared with TF beside _BUILDS (same fields; the last three unused)
_EXTRA = {
    "resnet_v1_101": ("resnet_v1.resnet_v1_101", "resnet_v1.resnet_arg_scope", 64, {}, 0, 0, 0),
    "resnet_v1_152": ("resnet_v1.resnet_v1_152", "resnet_v1.resnet_arg_scope", 64, {}, 0, 0, 0),
    "resnet_v1_200": ("resnet_v1.resnet_v1_200", "resnet_v1.resnet_arg_scope", 64, {}, 0, 0, 0),
    "resnet_v2_50": ("resnet_v2.resnet_v2_50", "resnet_v2.resnet_arg_scope", 64, {}, 0, 0, 0),
    "resnet_v2_152": ("resnet_v2.resnet_v2_152", "resnet_v2.resnet_arg_scope", 64, {}, 0, 0, 0),
    "resnet_v2_200": ("resnet_v2.resnet_v2_200", "resnet_v2.resnet_arg_scope", 64, {}, 0, 0, 0),
    "resnet_v1_50_dense": (
        "resnet_v1.resnet_v1_50",
        "resnet_v1.resnet_arg_scope",
        65,
        {"global_pool": False, "output_stride": 16},
        0,
        0,
        0,
    ),
    "inception_v3_thin": (
        "inception.inception_v3",
        "inception.inception_v3_arg_scope",
        150,
        {"depth_multiplier": 0.5, "spatial_squeeze": False},
        0,
        0,
        0,
    ),
    "inception_v2_small": (
        "inception.inception_v2",
        "inception.inception_v2_arg_scope",
        128,
        {"min_depth": 8, "depth_multiplier": 0.25},
        0,
        0,
        0,
    ),
    "vgg_16_fcn": (
        "vgg.vgg_16",
        "vgg.vgg_arg_scope",
        256,
        {"spatial_squeeze": False},
        0,
        0,
        0,
    ),
}
# nets whose values are compared too (the others: names and shapes)
_VALUES = {
    "alexnet_v2",
    "overfeat",
    "vgg_a",
    "vgg_16",
    "inception_v1",
    "inception_v2",
    "inception_v3",
    "resnet_v1_50",
    "resnet_v2_50",
    "resnet_v1_50_dense",
    "inception_v3_thin",
    "inception_v2_small",
}


# nets whose values reach hetbed through a checkpoint written by TF's Saver (restored with
# slim.assign_from_checkpoint_fn), the others' through Variable.load
_CHECKPOINT = {"resnet_v1_50", "resnet_v2_50", "inception_v3"}


@pytest.fixture(scope="module")
def tf_slim_mod():
    import importlib
    import sys

    pytest.importorskip("tensorflow")
    mod = pytest.importorskip("tf_slim")
    pytest.importorskip("tf_slim.nets")
    # TF 2.16+ loads tf.layers' batch norm from tf_keras.legacy_tf_layers, which tf_keras
    # keeps under tf_keras.src
    for sub in ("", ".normalization", ".base"):
        name = "tf_keras.legacy_tf_layers" + sub
        if name not in sys.modules:
            try:
                importlib.import_module(name)
            except ImportError:
                try:
                    sys.modules[name] = importlib.import_module(
                        "tf_keras.src.legacy_tf_layers" + sub
                    )
                except ImportError:
                    pytest.skip("tf_slim's batch_norm needs tf_keras's legacy layers")
    return mod


def _shapes(end_points: dict) -> dict:
    return {k: tuple(v.shape.as_list()) for k, v in end_points.items()}


def _random_batch_norm(values: dict, rng) -> dict:
    """TF's initial values with the batch norms' parameters and statistics made random (so
    that inference normalizes by something else than 0 and 1)."""
    out = dict(values)
    for k, v in values.items():
        leaf = k.rsplit("/", 1)[-1]
        if leaf in ("moving_mean", "beta"):
            out[k] = rng.normal(0.0, 0.1, v.shape).astype(np.float32)
        elif leaf in ("moving_variance", "gamma"):
            out[k] = rng.uniform(0.5, 1.5, v.shape).astype(np.float32)
    return out


@pytest.mark.parametrize("name", sorted(set(_BUILDS) | set(_EXTRA)))
def test_against_tf_slim(tf_slim_mod, name, tmp_path):
    import tensorflow as real_tf

    tf1 = real_tf.compat.v1
    size = (_BUILDS.get(name) or _EXTRA[name])[2]
    rng = np.random.default_rng(3)
    xv = rng.uniform(-1, 1, (2, size, size, 3)).astype(np.float32)
    with_values = name in _VALUES
    with tf1.Graph().as_default():
        x = tf1.placeholder(tf1.float32, [2, size, size, 3])
        t_net, t_ep = _build(name, x, root=tf_slim_mod.nets, arg_scope=tf_slim_mod.arg_scope)
        t_vars = {v.op.name: tuple(v.shape.as_list()) for v in tf1.global_variables()}
        t_shapes = _shapes(t_ep)
        if with_values:
            with tf1.Session() as sess:
                sess.run(tf1.global_variables_initializer())
                variables = tf1.global_variables()
                values = _random_batch_norm(sess.run({v.op.name: v for v in variables}), rng)
                # Variable.load for all at once: the initializers fed the new values
                sess.run(
                    [v.initializer for v in variables],
                    {v.initializer.inputs[1]: values[v.op.name] for v in variables},
                )
                t_out, t_eps = sess.run([t_net, t_ep], {x: xv})
                if name in _CHECKPOINT:
                    ckpt = tf1.train.Saver().save(sess, str(tmp_path / "model.ckpt"))
    x = tf.placeholder(tf.float32, [2, size, size, 3])
    h_net, h_ep = _build(name, x)
    assert _variables() == t_vars
    assert _shapes(h_ep) == t_shapes
    assert tuple(h_net.shape.as_list()) == tuple(t_net.shape.as_list())
    if not with_values:
        return
    with tf.Session() as sess:
        if name in _CHECKPOINT:
            slim.assign_from_checkpoint_fn(ckpt, slim.get_model_variables())(sess)
        else:
            for v in tf.global_variables():
                v.load(values[v.op.name], sess)
        h_out, h_eps = sess.run([h_net, h_ep], {x: xv})
    scale = float(np.abs(t_out).max())
    assert scale > 0
    np.testing.assert_allclose(h_out, t_out, rtol=1e-4, atol=1e-4 * scale)
    for k, want in t_eps.items():
        tol = 1e-4 * max(float(np.abs(want).max()), 1e-6)
        np.testing.assert_allclose(h_eps[k], want, rtol=1e-4, atol=tol, err_msg=k)
