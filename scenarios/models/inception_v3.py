"""Inception-v3 (Szegedy et al. 2016, "Rethinking the Inception Architecture") on 299x299 images,
laid out as TF-slim's ``inception_v3``: every convolution without bias, followed by batch norm
with a learned offset and no scale (epsilon 0.001, decay 0.9997) and a ReLU.

Parameters (trainable): 23,817,352 without the auxiliary head, the count of Keras'
``InceptionV3(weights=None)`` (its 23,851,784 adds 34,432 batch-norm moving statistics); with the
auxiliary head (``aux_logits=True``, slim's AuxLogits: 5x5/3 average pool, 1x1 conv 128, 5x5 conv
768, 1x1 conv to the classes) 27,143,152, about torchvision's 27,161,264 (whose batch norms also
learn a scale).
"""

from __future__ import annotations

from typing import Any

import hetbed as hb

from .convnets import avg_pool, conv, image_inputs, max_pool
from .modelgraph import ModelGraph, Recorder, classification_step

BN = {"scale": False, "epsilon": 0.001, "momentum": 0.9997}


def _c(x: Any, filters: int, kernel: Any, stride: int = 1, padding: str = "SAME", *, name: str):
    return conv(x, filters, kernel, stride, padding, name=name, bn=BN)


def _block_35(x: Any, pool_proj: int, name: str) -> Any:
    """Mixed_5b/5c/5d: 1x1; 1x1-5x5; 1x1-3x3-3x3; avgpool-1x1 (35x35 grid)."""
    with hb.variable_scope(name):
        b0 = _c(x, 64, 1, name="Branch_0/Conv2d_0a_1x1")
        b1 = _c(x, 48, 1, name="Branch_1/Conv2d_0a_1x1")
        b1 = _c(b1, 64, 5, name="Branch_1/Conv2d_0b_5x5")
        b2 = _c(x, 64, 1, name="Branch_2/Conv2d_0a_1x1")
        b2 = _c(b2, 96, 3, name="Branch_2/Conv2d_0b_3x3")
        b2 = _c(b2, 96, 3, name="Branch_2/Conv2d_0c_3x3")
        b3 = _c(avg_pool(x, 3, 1, "SAME"), pool_proj, 1, name="Branch_3/Conv2d_0b_1x1")
        return hb.concat([b0, b1, b2, b3], 3)


def _reduce_35_to_17(x: Any) -> Any:
    with hb.variable_scope("Mixed_6a"):
        b0 = _c(x, 384, 3, 2, "VALID", name="Branch_0/Conv2d_1a_1x1")
        b1 = _c(x, 64, 1, name="Branch_1/Conv2d_0a_1x1")
        b1 = _c(b1, 96, 3, name="Branch_1/Conv2d_0b_3x3")
        b1 = _c(b1, 96, 3, 2, "VALID", name="Branch_1/Conv2d_1a_1x1")
        b2 = max_pool(x, 3, 2)
        return hb.concat([b0, b1, b2], 3)


def _block_17(x: Any, n: int, name: str) -> Any:
    """Mixed_6b..6e: factorized 7x7 convolutions with ``n`` inner channels (17x17 grid)."""
    with hb.variable_scope(name):
        b0 = _c(x, 192, 1, name="Branch_0/Conv2d_0a_1x1")
        b1 = _c(x, n, 1, name="Branch_1/Conv2d_0a_1x1")
        b1 = _c(b1, n, (1, 7), name="Branch_1/Conv2d_0b_1x7")
        b1 = _c(b1, 192, (7, 1), name="Branch_1/Conv2d_0c_7x1")
        b2 = _c(x, n, 1, name="Branch_2/Conv2d_0a_1x1")
        b2 = _c(b2, n, (7, 1), name="Branch_2/Conv2d_0b_7x1")
        b2 = _c(b2, n, (1, 7), name="Branch_2/Conv2d_0c_1x7")
        b2 = _c(b2, n, (7, 1), name="Branch_2/Conv2d_0d_7x1")
        b2 = _c(b2, 192, (1, 7), name="Branch_2/Conv2d_0e_1x7")
        b3 = _c(avg_pool(x, 3, 1, "SAME"), 192, 1, name="Branch_3/Conv2d_0b_1x1")
        return hb.concat([b0, b1, b2, b3], 3)


def _reduce_17_to_8(x: Any) -> Any:
    with hb.variable_scope("Mixed_7a"):
        b0 = _c(x, 192, 1, name="Branch_0/Conv2d_0a_1x1")
        b0 = _c(b0, 320, 3, 2, "VALID", name="Branch_0/Conv2d_1a_3x3")
        b1 = _c(x, 192, 1, name="Branch_1/Conv2d_0a_1x1")
        b1 = _c(b1, 192, (1, 7), name="Branch_1/Conv2d_0b_1x7")
        b1 = _c(b1, 192, (7, 1), name="Branch_1/Conv2d_0c_7x1")
        b1 = _c(b1, 192, 3, 2, "VALID", name="Branch_1/Conv2d_1a_3x3")
        b2 = max_pool(x, 3, 2)
        return hb.concat([b0, b1, b2], 3)


def _block_8(x: Any, name: str) -> Any:
    """Mixed_7b/7c: expanded filter banks with parallel 1x3 and 3x1 (8x8 grid)."""
    with hb.variable_scope(name):
        b0 = _c(x, 320, 1, name="Branch_0/Conv2d_0a_1x1")
        b1 = _c(x, 384, 1, name="Branch_1/Conv2d_0a_1x1")
        b1 = hb.concat(
            [
                _c(b1, 384, (1, 3), name="Branch_1/Conv2d_0b_1x3"),
                _c(b1, 384, (3, 1), name="Branch_1/Conv2d_0c_3x1"),
            ],
            3,
        )
        b2 = _c(x, 448, 1, name="Branch_2/Conv2d_0a_1x1")
        b2 = _c(b2, 384, 3, name="Branch_2/Conv2d_0b_3x3")
        b2 = hb.concat(
            [
                _c(b2, 384, (1, 3), name="Branch_2/Conv2d_0c_1x3"),
                _c(b2, 384, (3, 1), name="Branch_2/Conv2d_0d_3x1"),
            ],
            3,
        )
        b3 = _c(avg_pool(x, 3, 1, "SAME"), 192, 1, name="Branch_3/Conv2d_0b_1x1")
        return hb.concat([b0, b1, b2, b3], 3)


def _aux_head(x: Any, num_classes: int) -> Any:
    with hb.variable_scope("AuxLogits"):
        h = avg_pool(x, 5, 3)
        h = _c(h, 128, 1, name="Conv2d_1b_1x1")
        k = h.shape.as_list()[1:3]
        h = _c(h, 768, k, 1, "VALID", name="Conv2d_2a_5x5")
        h = conv(h, num_classes, 1, relu=False, name="Conv2d_2b_1x1")
        return hb.squeeze(h, [1, 2])


def inception_v3(
    batch_size: int,
    dtype: Any = hb.float32,
    optimizer: Any = "sgd",
    image_size: int | None = None,
    *,
    num_classes: int = 1000,
    aux_logits: bool = False,
    keep_prob: float = 0.8,
    **kw: Any,
) -> ModelGraph:
    """Inception-v3 training step on 299x299 images (see the module docstring for the counts).

    With ``aux_logits`` the loss adds 0.4 times the auxiliary head's cross entropy, as slim's
    training script does.
    """
    size = 299 if image_size is None else int(image_size)
    if size < 75:
        raise ValueError(f"inception_v3: image_size {size} is too small (at least 75)")
    with Recorder() as rec:
        images, labels = image_inputs(batch_size, size, dtype)
        h = _c(images, 32, 3, 2, "VALID", name="Conv2d_1a_3x3")
        h = _c(h, 32, 3, 1, "VALID", name="Conv2d_2a_3x3")
        h = _c(h, 64, 3, name="Conv2d_2b_3x3")
        h = max_pool(h, 3, 2)
        h = _c(h, 80, 1, 1, "VALID", name="Conv2d_3b_1x1")
        h = _c(h, 192, 3, 1, "VALID", name="Conv2d_4a_3x3")
        h = max_pool(h, 3, 2)
        h = _block_35(h, 32, "Mixed_5b")
        h = _block_35(h, 64, "Mixed_5c")
        h = _block_35(h, 64, "Mixed_5d")
        h = _reduce_35_to_17(h)
        for name, n in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
            h = _block_17(h, n, name)
        aux = _aux_head(h, num_classes) if aux_logits else None
        h = _reduce_17_to_8(h)
        h = _block_8(h, "Mixed_7b")
        h = _block_8(h, "Mixed_7c")
        with hb.variable_scope("Logits"):
            h = hb.reduce_mean(h, [1, 2], keepdims=True)  # global average pool (8x8 at 299)
            if keep_prob < 1.0:
                h = hb.nn.dropout(h, keep_prob)
            h = conv(h, num_classes, 1, relu=False, name="Conv2d_1c_1x1")
            logits = hb.squeeze(h, [1, 2])
    return classification_step(
        "inception_v3" + ("_aux" if aux_logits else ""),
        rec,
        images,
        labels,
        logits,
        num_classes,
        aux_logits=aux,
        optimizer=optimizer,
        **kw,
    )
