"""Feed-forward image models: an MLP and a small CNN (MNIST-sized), AlexNet, Overfeat, VGG-A and
GoogLeNet (Inception v1), with the layer helpers that Inception-v3 and ResNet reuse.

Images are NHWC. Local response normalization (AlexNet, GoogLeNet) is left out: hetbed has no
LRN op, and it holds no parameters. Each builder's docstring names the published parameter count
it reproduces.
"""

from __future__ import annotations

from typing import Any

import hetbed as hb

from .modelgraph import ModelGraph, Recorder, classification_step

# ---- layer helpers ----------------------------------------------------------------------------


def image_inputs(batch_size: int, image_size: int, dtype: Any, channels: int = 3) -> tuple:
    images = hb.placeholder(dtype, [batch_size, image_size, image_size, channels], name="images")
    labels = hb.placeholder(hb.int32, [batch_size], name="labels")
    return images, labels


def conv(
    x: Any,
    filters: int,
    kernel: Any,
    stride: int = 1,
    padding: str = "SAME",
    *,
    name: str,
    relu: bool = True,
    bn: dict | None = None,
) -> Any:
    """Convolution (+ bias, or + batch norm when ``bn`` gives its settings) (+ ReLU).

    Variables: ``name/kernel`` and ``name/bias``, or ``name/kernel`` and ``name/BatchNorm/*``.
    """
    with hb.variable_scope(name):
        h = hb.layers.conv2d(
            x, filters, kernel, stride, padding=padding.lower(), use_bias=bn is None, name="conv"
        )
        if bn is not None:
            h = hb.layers.batch_normalization(h, training=True, name="BatchNorm", **bn)
        return hb.nn.relu(h) if relu else h


def max_pool(x: Any, k: int, s: int, padding: str = "VALID", name: str | None = None) -> Any:
    return hb.nn.max_pool(x, [1, k, k, 1], [1, s, s, 1], padding, name=name)


def avg_pool(x: Any, k: int, s: int, padding: str = "VALID", name: str | None = None) -> Any:
    return hb.nn.avg_pool(x, [1, k, k, 1], [1, s, s, 1], padding, name=name)


def flatten(x: Any) -> Any:
    dims = x.shape.as_list()
    n = 1
    for d in dims[1:]:
        n *= d
    return hb.reshape(x, [-1 if dims[0] is None else dims[0], n])


def fc(x: Any, units: int, name: str, relu: bool = True, keep_prob: float = 1.0) -> Any:
    """Dense layer (``name/kernel``, ``name/bias``), ReLU, then dropout when ``keep_prob`` < 1."""
    h = hb.layers.dense(x, units, activation=hb.nn.relu if relu else None, name=name)
    return hb.nn.dropout(h, keep_prob) if keep_prob < 1.0 else h


def _check_size(model: str, image_size: int, minimum: int) -> int:
    if image_size < minimum:
        raise ValueError(f"{model}: image_size {image_size} is too small (at least {minimum})")
    return int(image_size)


# ---- MLP and small CNN -------------------------------------------------------------------------


def mlp(
    batch_size: int,
    dtype: Any = hb.float32,
    optimizer: Any = "sgd",
    image_size: int | None = None,
    *,
    hidden: tuple[int, ...] = (512, 512),
    num_classes: int = 10,
    **kw: Any,
) -> ModelGraph:
    """ReLU MLP on flattened 28x28 images: 784-512-512-10, 669,706 parameters."""
    size = 28 if image_size is None else int(image_size)
    with Recorder() as rec:
        images = hb.placeholder(dtype, [batch_size, size * size], name="images")
        labels = hb.placeholder(hb.int32, [batch_size], name="labels")
        h = images
        for i, n in enumerate(hidden):
            h = fc(h, n, f"fc{i + 1}")
        logits = fc(h, num_classes, "logits", relu=False)
    return classification_step(
        "mlp", rec, images, labels, logits, num_classes, optimizer=optimizer, **kw
    )


def cnn(
    batch_size: int,
    dtype: Any = hb.float32,
    optimizer: Any = "sgd",
    image_size: int | None = None,
    *,
    num_classes: int = 10,
    keep_prob: float = 1.0,
    **kw: Any,
) -> ModelGraph:
    """TensorFlow's "Deep MNIST" CNN on 28x28x1: conv5x5 32, pool, conv5x5 64, pool, fc 1024, fc 10.

    3,274,634 parameters (TensorFlow 1.x tutorial "Deep MNIST for Experts").
    """
    size = 28 if image_size is None else _check_size("cnn", image_size, 4)
    with Recorder() as rec:
        images, labels = image_inputs(batch_size, size, dtype, channels=1)
        h = conv(images, 32, 5, name="conv1")
        h = max_pool(h, 2, 2, "SAME")
        h = conv(h, 64, 5, name="conv2")
        h = max_pool(h, 2, 2, "SAME")
        h = fc(flatten(h), 1024, "fc1", keep_prob=keep_prob)
        logits = fc(h, num_classes, "logits", relu=False)
    return classification_step(
        "cnn", rec, images, labels, logits, num_classes, optimizer=optimizer, **kw
    )


# ---- AlexNet, Overfeat, VGG --------------------------------------------------------------------

_ALEXNET = {
    # Krizhevsky et al. 2012, both GPU towers merged into one (no grouped convolutions)
    "original": (96, 256, 384, 384, 256),
    # Krizhevsky 2014, "One weird trick for parallelizing CNNs": the one-tower variant
    "owt": (64, 192, 384, 256, 256),
}


def alexnet(
    batch_size: int,
    dtype: Any = hb.float32,
    optimizer: Any = "sgd",
    image_size: int | None = None,
    *,
    variant: str = "original",
    num_classes: int = 1000,
    keep_prob: float = 0.5,
    **kw: Any,
) -> ModelGraph:
    """AlexNet as one tower on 227x227: conv 11x11/4, pool, conv 5x5, pool, 3x conv 3x3, pool,
    fc 4096, fc 4096, fc 1000 (dropout 0.5 before the last two). No LRN.

    ``variant="original"`` has the 2012 channels 96-256-384-384-256 with both towers merged:
    62,378,344 parameters (the count usually quoted for ungrouped AlexNet, e.g. LearnOpenCV's
    "Number of parameters and tensor sizes in AlexNet"; the grouped 2-GPU net has 60,965,224).
    ``variant="owt"`` is Krizhevsky's 2014 one-tower net (64-192-384-256-256), 61,100,840
    parameters (torchvision's ``alexnet``).
    """
    if variant not in _ALEXNET:
        raise ValueError(f"alexnet: variant must be one of {sorted(_ALEXNET)}, got {variant!r}")
    c1, c2, c3, c4, c5 = _ALEXNET[variant]
    size = 227 if image_size is None else _check_size("alexnet", image_size, 67)
    with Recorder() as rec:
        images, labels = image_inputs(batch_size, size, dtype)
        h = conv(images, c1, 11, 4, "VALID", name="conv1")
        h = max_pool(h, 3, 2)
        h = conv(h, c2, 5, name="conv2")
        h = max_pool(h, 3, 2)
        h = conv(h, c3, 3, name="conv3")
        h = conv(h, c4, 3, name="conv4")
        h = conv(h, c5, 3, name="conv5")
        h = max_pool(h, 3, 2)
        h = fc(flatten(h), 4096, "fc6", keep_prob=keep_prob)
        h = fc(h, 4096, "fc7", keep_prob=keep_prob)
        logits = fc(h, num_classes, "fc8", relu=False)
    name = "alexnet" if variant == "original" else f"alexnet_{variant}"
    return classification_step(
        name, rec, images, labels, logits, num_classes, optimizer=optimizer, **kw
    )


def overfeat(
    batch_size: int,
    dtype: Any = hb.float32,
    optimizer: Any = "sgd",
    image_size: int | None = None,
    *,
    num_classes: int = 1000,
    keep_prob: float = 0.5,
    **kw: Any,
) -> ModelGraph:
    """Overfeat's fast model on 231x231 (Sermanet et al. 2014, Table 1): conv 11x11/4 96, pool 2,
    conv 5x5 256, pool 2, conv 3x3 512, 1024, 1024, pool 2, fc 3072, fc 4096, fc 1000.

    145,921,872 parameters; the paper (Table 3) gives 145 million for the fast model.
    """
    size = 231 if image_size is None else _check_size("overfeat", image_size, 71)
    with Recorder() as rec:
        images, labels = image_inputs(batch_size, size, dtype)
        h = conv(images, 96, 11, 4, "VALID", name="conv1")
        h = max_pool(h, 2, 2)
        h = conv(h, 256, 5, 1, "VALID", name="conv2")
        h = max_pool(h, 2, 2)
        h = conv(h, 512, 3, name="conv3")
        h = conv(h, 1024, 3, name="conv4")
        h = conv(h, 1024, 3, name="conv5")
        h = max_pool(h, 2, 2)
        h = fc(flatten(h), 3072, "fc6", keep_prob=keep_prob)
        h = fc(h, 4096, "fc7", keep_prob=keep_prob)
        logits = fc(h, num_classes, "fc8", relu=False)
    return classification_step(
        "overfeat", rec, images, labels, logits, num_classes, optimizer=optimizer, **kw
    )


_VGG = {
    "a": (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"),
    "d": (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"),
    "e": (
        *(64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M"),
        *(512, 512, 512, 512, "M", 512, 512, 512, 512, "M"),
    ),
}


def vgg(
    batch_size: int,
    dtype: Any = hb.float32,
    optimizer: Any = "sgd",
    image_size: int | None = None,
    *,
    config: str = "a",
    num_classes: int = 1000,
    keep_prob: float = 0.5,
    **kw: Any,
) -> ModelGraph:
    """VGG / OxfordNet (Simonyan & Zisserman 2015) on 224x224: 3x3 convs, 2x2 pools, fc 4096,
    4096, 1000. Configuration A (VGG-11) has 132,863,336 parameters (the paper's Table 2: 133M);
    D (VGG-16) 138,357,544; E (VGG-19) 143,667,240."""
    if config not in _VGG:
        raise ValueError(f"vgg: config must be one of {sorted(_VGG)}, got {config!r}")
    size = 224 if image_size is None else _check_size("vgg", image_size, 32)
    with Recorder() as rec:
        images, labels = image_inputs(batch_size, size, dtype)
        h, n = images, 0
        for layer in _VGG[config]:
            if layer == "M":
                h = max_pool(h, 2, 2)
            else:
                n += 1
                h = conv(h, layer, 3, name=f"conv{n}")
        h = fc(flatten(h), 4096, "fc6", keep_prob=keep_prob)
        h = fc(h, 4096, "fc7", keep_prob=keep_prob)
        logits = fc(h, num_classes, "fc8", relu=False)
    return classification_step(
        f"vgg_{config}", rec, images, labels, logits, num_classes, optimizer=optimizer, **kw
    )


def vgg_a(batch_size: int, dtype: Any = hb.float32, optimizer: Any = "sgd", image_size=None, **kw):
    """VGG model A (OxfordNet A, VGG-11): 132,863,336 parameters."""
    return vgg(batch_size, dtype, optimizer, image_size, config="a", **kw)


# ---- GoogLeNet (Inception v1) ------------------------------------------------------------------

# Szegedy et al. 2015, Table 1: #1x1, #3x3 reduce, #3x3, #5x5 reduce, #5x5, pool proj
_GOOGLENET = {
    "3a": (64, 96, 128, 16, 32, 32),
    "3b": (128, 128, 192, 32, 96, 64),
    "4a": (192, 96, 208, 16, 48, 64),
    "4b": (160, 112, 224, 24, 64, 64),
    "4c": (128, 128, 256, 24, 64, 64),
    "4d": (112, 144, 288, 32, 64, 64),
    "4e": (256, 160, 320, 32, 128, 128),
    "5a": (256, 160, 320, 32, 128, 128),
    "5b": (384, 192, 384, 48, 128, 128),
}


def _inception_v1_module(x: Any, name: str) -> Any:
    n1, r3, n3, r5, n5, pp = _GOOGLENET[name]
    with hb.variable_scope(f"inception_{name}"):
        b0 = conv(x, n1, 1, name="1x1")
        b1 = conv(conv(x, r3, 1, name="3x3_reduce"), n3, 3, name="3x3")
        b2 = conv(conv(x, r5, 1, name="5x5_reduce"), n5, 5, name="5x5")
        b3 = conv(max_pool(x, 3, 1, "SAME"), pp, 1, name="pool_proj")
        return hb.concat([b0, b1, b2, b3], 3)


def googlenet(
    batch_size: int,
    dtype: Any = hb.float32,
    optimizer: Any = "sgd",
    image_size: int | None = None,
    *,
    num_classes: int = 1000,
    keep_prob: float = 0.6,
    **kw: Any,
) -> ModelGraph:
    """GoogLeNet / Inception v1 (Szegedy et al. 2015, Table 1) on 224x224, without the two
    auxiliary classifiers and without LRN: 6,998,552 parameters (convolutions with biases, as in
    the paper and Caffe's bvlc_googlenet; the paper's Table 1 sums to about 6.8M, counting
    weights only)."""
    size = 224 if image_size is None else _check_size("googlenet", image_size, 32)
    with Recorder() as rec:
        images, labels = image_inputs(batch_size, size, dtype)
        h = conv(images, 64, 7, 2, name="conv1_7x7_s2")
        h = max_pool(h, 3, 2, "SAME")
        h = conv(h, 64, 1, name="conv2_3x3_reduce")
        h = conv(h, 192, 3, name="conv2_3x3")
        h = max_pool(h, 3, 2, "SAME")
        h = _inception_v1_module(h, "3a")
        h = _inception_v1_module(h, "3b")
        h = max_pool(h, 3, 2, "SAME")
        for m in ("4a", "4b", "4c", "4d", "4e"):
            h = _inception_v1_module(h, m)
        h = max_pool(h, 3, 2, "SAME")
        h = _inception_v1_module(h, "5a")
        h = _inception_v1_module(h, "5b")
        h = hb.reduce_mean(h, [1, 2])  # global average pooling (7x7 at 224x224)
        if keep_prob < 1.0:
            h = hb.nn.dropout(h, keep_prob)
        logits = fc(h, num_classes, "loss3_classifier", relu=False)
    return classification_step(
        "googlenet", rec, images, labels, logits, num_classes, optimizer=optimizer, **kw
    )
