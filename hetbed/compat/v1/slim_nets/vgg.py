"""``slim.nets.vgg``: the VGG nets of Simonyan and Zisserman (configurations A, D and E: 11,
16 and 19 layers), their fully connected layers as convolutions (``fc6`` a 7x7 VALID one, so
that a 224x224 input gives 1x1 logits), with TF's variable and end point names
(``vgg_16/conv1/conv1_1/biases``, ``vgg_16/pool5``, ``vgg_16/fc8``)."""

from __future__ import annotations

from typing import Any

import hetbed as _hb

from ._common import (
    arg_scope,
    conv2d,
    convert_collection_to_dict,
    dropout,
    fully_connected,
    l2_regularizer,
    max_pool2d,
    repeat,
    zeros,
)

__all__ = ["vgg_16", "vgg_19", "vgg_a", "vgg_arg_scope", "vgg_d", "vgg_e"]


def vgg_arg_scope(weight_decay: float = 0.0005) -> dict:
    """ReLU, zero biases and L2 weight decay for the convolutions and fully connected layers;
    convolutions SAME."""
    with (
        arg_scope(
            [conv2d, fully_connected],
            activation_fn=_hb.nn.relu,
            weights_regularizer=l2_regularizer(weight_decay),
            biases_initializer=zeros(),
        ),
        arg_scope([conv2d], padding="SAME") as sc,
    ):
        return sc


_WIDTHS = (64, 128, 256, 512, 512)  # channels of the five groups of 3x3 convolutions


def _vgg(
    config: str,
    repeats: tuple,
    inputs: Any,
    num_classes: int,
    is_training: Any,
    dropout_keep_prob: float,
    spatial_squeeze: bool,
    scope: Any,
) -> tuple:
    """Five groups of 3x3 convolutions (``conv<i>/conv<i>_<j>``, ``repeats[i]`` of them), each
    followed by a 2x2 max pool (``pool<i>``), then ``fc6`` (7x7 VALID, 4096), ``fc7`` (1x1,
    4096) with dropout after each, and ``fc8`` (the logits)."""
    with _hb.variable_scope(scope, config, [inputs]) as sc:
        # TF's end point collection: vgg_19 names it by the scope, the others by the name scope
        collection = (sc.name if config == "vgg_19" else sc.original_name_scope) + "_end_points"
        collected = (
            [conv2d, max_pool2d] if config == "vgg_a" else [conv2d, fully_connected, max_pool2d]
        )
        with arg_scope(collected, outputs_collections=collection):
            net = inputs
            for i, (n, width) in enumerate(zip(repeats, _WIDTHS)):
                net = repeat(net, n, conv2d, width, [3, 3], scope=f"conv{i + 1}")
                net = max_pool2d(net, [2, 2], scope=f"pool{i + 1}")
            net = conv2d(net, 4096, [7, 7], padding="VALID", scope="fc6")
            net = dropout(net, dropout_keep_prob, is_training=is_training, scope="dropout6")
            net = conv2d(net, 4096, [1, 1], scope="fc7")
            net = dropout(net, dropout_keep_prob, is_training=is_training, scope="dropout7")
            net = conv2d(
                net, num_classes, [1, 1], activation_fn=None, normalizer_fn=None, scope="fc8"
            )
            end_points = convert_collection_to_dict(collection)
            if spatial_squeeze:
                net = _hb.squeeze(net, [1, 2], name="fc8/squeezed")
                end_points[sc.name + "/fc8"] = net
            return net, end_points


def _config(config: str, repeats: tuple, title: str) -> Any:
    def net(
        inputs: Any,
        num_classes: int = 1000,
        is_training: Any = True,
        dropout_keep_prob: float = 0.5,
        spatial_squeeze: bool = True,
        scope: Any = config,
    ) -> tuple:
        return _vgg(
            config,
            repeats,
            inputs,
            num_classes,
            is_training,
            dropout_keep_prob,
            spatial_squeeze,
            scope,
        )

    net.__name__ = net.__qualname__ = config
    net.__doc__ = (
        f"VGG {title} of ``inputs`` [batch, 224, 224, 3] (or larger, with ``spatial_squeeze`` "
        "False); returns the logits [batch, num_classes] and the end points (every convolution "
        "and max pool by its scope name)."
    )
    net.default_image_size = 224  # type: ignore[attr-defined]
    return net


vgg_a = _config("vgg_a", (1, 1, 2, 2, 2), "11 layers (configuration A)")
vgg_16 = _config("vgg_16", (2, 2, 3, 3, 3), "16 layers (configuration D)")
vgg_19 = _config("vgg_19", (2, 2, 4, 4, 4), "19 layers (configuration E)")
vgg_d = vgg_16
vgg_e = vgg_19
