"""``slim.nets.inception_v2``: Inception with batch normalization (Ioffe and Szegedy 2015) as
TF-Slim builds it, with TF's variable and end point names
(``InceptionV2/Conv2d_1a_7x7/depthwise_weights``, ``InceptionV2/Mixed_4a/Branch_0/
Conv2d_1a_3x3/weights``); ``depth_multiplier`` thins every layer (not below ``min_depth``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hetbed as _hb

from ._common import (
    arg_scope,
    avg_pool,
    avg_pool2d,
    batch_norm,
    batch_norm_params,
    conv,
    conv2d,
    dropout,
    fully_connected,
    l2_regularizer,
    max_pool,
    max_pool2d,
    mixed,
    reduced_kernel,
    separable_conv2d,
    softmax,
    trunc_normal,
    variance_scaling_initializer,
)

__all__ = ["inception_v2", "inception_v2_arg_scope", "inception_v2_base"]

# the modules that keep the size: 1x1; 1x1 then 3x3; 1x1 then two 3x3; a 3x3 pool then 1x1
_MODULES = {
    "Mixed_3b": (64, 64, 64, 64, 96, 32, "avg"),
    "Mixed_3c": (64, 64, 96, 64, 96, 64, "avg"),
    "Mixed_4b": (224, 64, 96, 96, 128, 128, "avg"),
    "Mixed_4c": (192, 96, 128, 96, 128, 128, "avg"),
    "Mixed_4d": (160, 128, 160, 128, 160, 96, "avg"),
    "Mixed_4e": (96, 128, 192, 160, 192, 96, "avg"),
    "Mixed_5b": (352, 192, 320, 160, 224, 128, "avg"),
    "Mixed_5c": (352, 192, 320, 192, 224, 128, "max"),
}
# the modules that halve it: 1x1 then 3x3/2; 1x1 then 3x3 then 3x3/2; a 3x3/2 max pool
_REDUCTIONS = {"Mixed_4a": (128, 160, 64, 96), "Mixed_5a": (128, 192, 192, 256)}
_ORDER = [
    "Mixed_3b",
    "Mixed_3c",
    "Mixed_4a",
    "Mixed_4b",
    "Mixed_4c",
    "Mixed_4d",
    "Mixed_4e",
    "Mixed_5a",
    "Mixed_5b",
    "Mixed_5c",
]


def _module(name: str, depth: Callable[[int], int]) -> list:
    reduce_init = {"weights_initializer": trunc_normal(0.09)}
    if name in _REDUCTIONS:
        b0a, b0b, b1a, b1b = _REDUCTIONS[name]
        return [
            [
                conv(depth(b0a), [1, 1], "Conv2d_0a_1x1", **reduce_init),
                conv(depth(b0b), [3, 3], "Conv2d_1a_3x3", stride=2),
            ],
            [
                conv(depth(b1a), [1, 1], "Conv2d_0a_1x1", **reduce_init),
                conv(depth(b1b), [3, 3], "Conv2d_0b_3x3"),
                conv(depth(b1b), [3, 3], "Conv2d_1a_3x3", stride=2),
            ],
            [max_pool([3, 3], "MaxPool_1a_3x3", stride=2)],
        ]
    b0, b1a, b1b, b2a, b2b, b3, pool = _MODULES[name]
    pooling = (
        avg_pool([3, 3], "AvgPool_0a_3x3") if pool == "avg" else max_pool([3, 3], "MaxPool_0a_3x3")
    )
    return [
        [conv(depth(b0), [1, 1], "Conv2d_0a_1x1")],
        [
            conv(depth(b1a), [1, 1], "Conv2d_0a_1x1", **reduce_init),
            conv(depth(b1b), [3, 3], "Conv2d_0b_3x3"),
        ],
        [
            conv(depth(b2a), [1, 1], "Conv2d_0a_1x1", **reduce_init),
            conv(depth(b2b), [3, 3], "Conv2d_0b_3x3"),
            conv(depth(b2b), [3, 3], "Conv2d_0c_3x3"),
        ],
        [pooling, conv(depth(b3), [1, 1], "Conv2d_0b_1x1", weights_initializer=trunc_normal(0.1))],
    ]


def _depth_fn(min_depth: int, depth_multiplier: float) -> Callable[[int], int]:
    if depth_multiplier <= 0:
        raise ValueError("depth_multiplier is not greater than zero.")
    return lambda d: max(int(d * depth_multiplier), min_depth)


def inception_v2_base(
    inputs: Any,
    final_endpoint: str = "Mixed_5c",
    min_depth: int = 16,
    depth_multiplier: float = 1.0,
    scope: Any = None,
) -> tuple:
    """Inception v2 from ``inputs`` up to ``final_endpoint`` (``Conv2d_1a_7x7``,
    ``MaxPool_2a_3x3``, ``Conv2d_2b_1x1``, ``Conv2d_2c_3x3``, ``MaxPool_3a_3x3``,
    ``Mixed_3b``, ``Mixed_3c``, ``Mixed_4a`` ... ``Mixed_4e``, ``Mixed_5a``, ``Mixed_5b``,
    ``Mixed_5c``); returns that tensor and the end points so far. The first layer is a 7x7
    separable convolution. Raises ValueError for an unknown ``final_endpoint`` or a
    ``depth_multiplier`` not above zero."""
    depth = _depth_fn(min_depth, depth_multiplier)
    end_points: dict = {}
    with _hb.variable_scope(scope, "InceptionV2", [inputs]):
        with arg_scope(
            [conv2d, max_pool2d, avg_pool2d, separable_conv2d], stride=1, padding="SAME"
        ):
            per_channel = min(int(depth(64) / 3), 8)  # the depthwise part's multiplier
            stem = [
                (
                    "Conv2d_1a_7x7",
                    lambda x: separable_conv2d(
                        x,
                        depth(64),
                        [7, 7],
                        depth_multiplier=per_channel,
                        stride=2,
                        weights_initializer=trunc_normal(1.0),
                        scope="Conv2d_1a_7x7",
                    ),
                ),
                ("MaxPool_2a_3x3", max_pool([3, 3], "MaxPool_2a_3x3", stride=2)),
                (
                    "Conv2d_2b_1x1",
                    conv(depth(64), [1, 1], "Conv2d_2b_1x1", weights_initializer=trunc_normal(0.1)),
                ),
                ("Conv2d_2c_3x3", conv(depth(192), [3, 3], "Conv2d_2c_3x3")),
                ("MaxPool_3a_3x3", max_pool([3, 3], "MaxPool_3a_3x3", stride=2)),
            ]
            net = inputs
            for name, layer in stem:
                net = layer(net)
                end_points[name] = net
                if name == final_endpoint:
                    return net, end_points
            for name in _ORDER:
                net = mixed(net, name, _module(name, depth))
                end_points[name] = net
                if name == final_endpoint:
                    return net, end_points
    raise ValueError(f"Unknown final endpoint {final_endpoint}")


def inception_v2(
    inputs: Any,
    num_classes: int = 1000,
    is_training: Any = True,
    dropout_keep_prob: float = 0.8,
    min_depth: int = 16,
    depth_multiplier: float = 1.0,
    prediction_fn: Callable = softmax,
    spatial_squeeze: bool = True,
    reuse: Any = None,
    scope: Any = "InceptionV2",
) -> tuple:
    """Inception v2 of ``inputs`` [batch, 224, 224, 3] (smaller inputs shrink the final average
    pool): the base, an average pool (``Logits/AvgPool_1a_7x7``), dropout and a 1x1 convolution
    to ``num_classes``; returns the logits and the end points with ``Logits`` and
    ``Predictions``."""
    _depth_fn(min_depth, depth_multiplier)
    with _hb.variable_scope(scope, "InceptionV2", [inputs, num_classes], reuse=reuse) as sc:
        with arg_scope([batch_norm, dropout], is_training=is_training):
            net, end_points = inception_v2_base(
                inputs, scope=sc, min_depth=min_depth, depth_multiplier=depth_multiplier
            )
            with _hb.variable_scope("Logits"):
                kernel = reduced_kernel(net, [7, 7])
                net = avg_pool2d(
                    net, kernel, padding="VALID", scope="AvgPool_1a_{}x{}".format(*kernel)
                )
                net = dropout(net, keep_prob=dropout_keep_prob, scope="Dropout_1b")
                logits = conv2d(
                    net,
                    num_classes,
                    [1, 1],
                    activation_fn=None,
                    normalizer_fn=None,
                    scope="Conv2d_1c_1x1",
                )
                if spatial_squeeze:
                    logits = _hb.squeeze(logits, [1, 2], name="SpatialSqueeze")
            end_points["Logits"] = logits
            end_points["Predictions"] = prediction_fn(logits, scope="Predictions")
    return logits, end_points


inception_v2.default_image_size = 224  # type: ignore[attr-defined]


def inception_v2_arg_scope(
    weight_decay: float = 0.00004, batch_norm_var_collection: str = "moving_vars"
) -> dict:
    """L2 weight decay for convolutions and fully connected layers; convolutions with He
    initialization, ReLU and batch norm of decay 0.9997, epsilon 0.001, the moving statistics
    also in ``batch_norm_var_collection``."""
    params = batch_norm_params(0.9997, 0.001, _hb.GraphKeys.UPDATE_OPS, batch_norm_var_collection)
    with arg_scope([conv2d, fully_connected], weights_regularizer=l2_regularizer(weight_decay)):
        with arg_scope(
            [conv2d],
            weights_initializer=variance_scaling_initializer(),
            activation_fn=_hb.nn.relu,
            normalizer_fn=batch_norm,
            normalizer_params=params,
        ) as sc:
            return sc
