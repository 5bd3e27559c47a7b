"""ResNet (He et al. 2016) with bottleneck blocks on 224x224 images, "v1.5" layout (the stride of
a downsampling block in its 3x3 convolution, as in torchvision and TensorFlow's official models;
the paper's v1 puts it in the first 1x1, same parameters, about 6% fewer FLOPs).

Convolutions have no bias; batch norm (scale and offset, epsilon 1e-5, decay 0.997) follows each.
Trainable parameters: ResNet-50 25,557,032; ResNet-101 44,549,160; ResNet-152 60,192,808 (the
counts of torchvision's ``resnet50/101/152``; the paper's Table 1 lists 3.8, 7.6 and 11.3 GFLOPs
counted as multiply-adds, which hetbed's cost rules count as 2 FLOPs each).
"""

from __future__ import annotations

from typing import Any

import hetbed as hb

from .convnets import conv, image_inputs, max_pool
from .modelgraph import ModelGraph, Recorder, classification_step

BN = {"epsilon": 1e-5, "momentum": 0.997}
BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


def _bottleneck(x: Any, width: int, stride: int, project: bool, name: str) -> Any:
    with hb.variable_scope(name):
        shortcut = x
        if project:
            shortcut = conv(x, 4 * width, 1, stride, name="shortcut", relu=False, bn=BN)
        h = conv(x, width, 1, name="conv1", bn=BN)
        h = conv(h, width, 3, stride, name="conv2", bn=BN)
        h = conv(h, 4 * width, 1, name="conv3", relu=False, bn=BN)
        return hb.nn.relu(hb.add(h, shortcut))


def resnet(
    batch_size: int,
    dtype: Any = hb.float32,
    optimizer: Any = "sgd",
    image_size: int | None = None,
    *,
    depth: int = 50,
    num_classes: int = 1000,
    **kw: Any,
) -> ModelGraph:
    """ResNet-``depth`` (50, 101 or 152) training step; see the module docstring."""
    if depth not in BLOCKS:
        raise ValueError(f"resnet: depth must be one of {sorted(BLOCKS)}, got {depth}")
    size = 224 if image_size is None else int(image_size)
    if size < 32:
        raise ValueError(f"resnet: image_size {size} is too small (at least 32)")
    with Recorder() as rec:
        images, labels = image_inputs(batch_size, size, dtype)
        h = conv(images, 64, 7, 2, name="conv1", bn=BN)
        h = max_pool(h, 3, 2, "SAME")
        for stage, n in enumerate(BLOCKS[depth]):
            width = 64 * 2**stage
            for b in range(n):
                stride = 2 if b == 0 and stage > 0 else 1
                h = _bottleneck(h, width, stride, b == 0, f"block{stage + 1}/unit{b + 1}")
        h = hb.reduce_mean(h, [1, 2])  # global average pooling
        logits = hb.layers.dense(h, num_classes, name="logits")
    return classification_step(
        f"resnet{depth}", rec, images, labels, logits, num_classes, optimizer=optimizer, **kw
    )


def resnet50(
    batch_size: int, dtype: Any = hb.float32, optimizer: Any = "sgd", image_size=None, **kw
):
    """ResNet-50 v1.5: 25,557,032 parameters, about 4.1 G multiply-adds per 224x224 image."""
    return resnet(batch_size, dtype, optimizer, image_size, depth=50, **kw)


def resnet101(
    batch_size: int, dtype: Any = hb.float32, optimizer: Any = "sgd", image_size=None, **kw
):
    """ResNet-101 v1.5: 44,549,160 parameters."""
    return resnet(batch_size, dtype, optimizer, image_size, depth=101, **kw)


def resnet152(
    batch_size: int, dtype: Any = hb.float32, optimizer: Any = "sgd", image_size=None, **kw
):
    """ResNet-152 v1.5: 60,192,808 parameters."""
    return resnet(batch_size, dtype, optimizer, image_size, depth=152, **kw)
