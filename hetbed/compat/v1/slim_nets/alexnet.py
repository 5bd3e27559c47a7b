"""``slim.nets.alexnet``: AlexNet v2 (the one-GPU cuda-convnet2 layout of arXiv:1404.5997
without the LRN layers), its fully connected layers as convolutions (``fc6`` a 5x5 VALID one,
so that a 224x224 input gives 1x1 logits), with TF's variable and end point names
(``alexnet_v2/conv1/weights``, ``alexnet_v2/pool5``, ``alexnet_v2/fc8``)."""

from __future__ import annotations

from typing import Any

import hetbed as _hb

from ._common import (
    arg_scope,
    constant,
    conv2d,
    convert_collection_to_dict,
    dropout,
    end_points_name,
    fully_connected,
    l2_regularizer,
    max_pool2d,
    trunc_normal,
    zeros,
)

__all__ = ["alexnet_v2", "alexnet_v2_arg_scope"]


def alexnet_v2_arg_scope(weight_decay: float = 0.0005) -> dict:
    """ReLU, biases of 0.1 and L2 weight decay for the convolutions and fully connected
    layers; convolutions SAME, max pools VALID."""
    with (
        arg_scope(
            [conv2d, fully_connected],
            activation_fn=_hb.nn.relu,
            biases_initializer=constant(0.1),
            weights_regularizer=l2_regularizer(weight_decay),
        ),
        arg_scope([conv2d], padding="SAME"),
        arg_scope([max_pool2d], padding="VALID") as sc,
    ):
        return sc


# (name, outputs, kernel, stride, padding) of the convolutions; a max pool of 3x3, stride 2
# follows conv1, conv2 and conv5
_FEATURES = [
    ("conv1", 64, 11, 4, "VALID"),
    ("conv2", 192, 5, 1, None),
    ("conv3", 384, 3, 1, None),
    ("conv4", 384, 3, 1, None),
    ("conv5", 256, 3, 1, None),
]


def alexnet_v2(
    inputs: Any,
    num_classes: int = 1000,
    is_training: Any = True,
    dropout_keep_prob: float = 0.5,
    spatial_squeeze: bool = True,
    scope: Any = "alexnet_v2",
) -> tuple:
    """AlexNet v2 of ``inputs`` [batch, 224, 224, 3] (or larger, with ``spatial_squeeze``
    False); returns the logits [batch, num_classes] and the end points (every convolution and
    max pool by its scope name)."""
    with _hb.variable_scope(scope, "alexnet_v2", [inputs]) as sc:
        collection = end_points_name(sc)
        with arg_scope([conv2d, fully_connected, max_pool2d], outputs_collections=[collection]):
            net = inputs
            for name, depth, kernel, stride, padding in _FEATURES:
                pad = {"padding": padding} if padding else {}
                net = conv2d(net, depth, [kernel, kernel], stride, scope=name, **pad)
                if name in ("conv1", "conv2", "conv5"):
                    net = max_pool2d(net, [3, 3], 2, scope="pool" + name[-1])
            with arg_scope(
                [conv2d], weights_initializer=trunc_normal(0.005), biases_initializer=constant(0.1)
            ):
                net = conv2d(net, 4096, [5, 5], padding="VALID", scope="fc6")
                net = dropout(net, dropout_keep_prob, is_training=is_training, scope="dropout6")
                net = conv2d(net, 4096, [1, 1], scope="fc7")
                net = dropout(net, dropout_keep_prob, is_training=is_training, scope="dropout7")
                net = conv2d(
                    net,
                    num_classes,
                    [1, 1],
                    activation_fn=None,
                    normalizer_fn=None,
                    biases_initializer=zeros(),
                    scope="fc8",
                )
            end_points = convert_collection_to_dict(collection)
            if spatial_squeeze:
                net = _hb.squeeze(net, [1, 2], name="fc8/squeezed")
                end_points[sc.name + "/fc8"] = net
            return net, end_points


alexnet_v2.default_image_size = 224  # type: ignore[attr-defined]
