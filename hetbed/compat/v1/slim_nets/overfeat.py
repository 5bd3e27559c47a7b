"""``slim.nets.overfeat``: OverFeat (Sermanet et al. 2014, the fast model), its fully connected
layers as convolutions (``fc6`` a 6x6 VALID one, so that a 231x231 input gives 1x1 logits),
with TF's variable and end point names (``overfeat/conv1/weights``, ``overfeat/fc8``)."""

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

__all__ = ["overfeat", "overfeat_arg_scope"]


def overfeat_arg_scope(weight_decay: float = 0.0005) -> dict:
    """ReLU, zero biases and L2 weight decay for the convolutions and fully connected layers;
    convolutions SAME, max pools VALID."""
    with (
        arg_scope(
            [conv2d, fully_connected],
            activation_fn=_hb.nn.relu,
            weights_regularizer=l2_regularizer(weight_decay),
            biases_initializer=zeros(),
        ),
        arg_scope([conv2d], padding="SAME"),
        arg_scope([max_pool2d], padding="VALID") as sc,
    ):
        return sc


# (name, outputs, kernel, stride, padding) of the convolutions; a 2x2 max pool (stride 2)
# follows conv1, conv2 and conv5
_FEATURES = [
    ("conv1", 64, 11, 4, "VALID"),
    ("conv2", 256, 5, 1, "VALID"),
    ("conv3", 512, 3, 1, None),
    ("conv4", 1024, 3, 1, None),
    ("conv5", 1024, 3, 1, None),
]


def overfeat(
    inputs: Any,
    num_classes: int = 1000,
    is_training: Any = True,
    dropout_keep_prob: float = 0.5,
    spatial_squeeze: bool = True,
    scope: Any = "overfeat",
) -> tuple:
    """OverFeat of ``inputs`` [batch, 231, 231, 3] (or larger, with ``spatial_squeeze``
    False); returns the logits [batch, num_classes] and the end points (every convolution and
    max pool by its scope name)."""
    with _hb.variable_scope(scope, "overfeat", [inputs]) as sc:
        collection = end_points_name(sc, original=False)
        with arg_scope([conv2d, fully_connected, max_pool2d], outputs_collections=collection):
            net = inputs
            for name, depth, kernel, stride, padding in _FEATURES:
                pad = {"padding": padding} if padding else {}
                net = conv2d(net, depth, [kernel, kernel], stride, scope=name, **pad)
                if name in ("conv1", "conv2", "conv5"):
                    net = max_pool2d(net, [2, 2], scope="pool" + name[-1])
            with arg_scope(
                [conv2d], weights_initializer=trunc_normal(0.005), biases_initializer=constant(0.1)
            ):
                net = conv2d(net, 3072, [6, 6], padding="VALID", scope="fc6")
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


overfeat.default_image_size = 231  # type: ignore[attr-defined]
