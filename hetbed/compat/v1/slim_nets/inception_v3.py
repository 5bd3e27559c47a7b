"""``slim.nets.inception_v3``: Inception v3 (Szegedy et al. 2015, "Rethinking the Inception
Architecture") as TF-Slim builds it, with TF's variable and end point names
(``InceptionV3/Mixed_5b/Branch_1/Conv2d_0b_5x5/weights``, ``InceptionV3/AuxLogits/
Conv2d_2b_1x1/biases``, and TF's odd ones such as ``Mixed_5c/Branch_1/Conv_1_0c_5x5``);
``depth_multiplier`` thins every layer (not below ``min_depth``)."""

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
    fork,
    fully_connected,
    l2_regularizer,
    max_pool,
    max_pool2d,
    mixed,
    reduced_kernel,
    softmax,
    trunc_normal,
    variance_scaling_initializer,
)
from .inception_v2 import _depth_fn

__all__ = ["inception_v3", "inception_v3_arg_scope", "inception_v3_base"]

_STEM = ["Conv2d_1a_3x3", "Conv2d_2a_3x3", "Conv2d_2b_3x3", "MaxPool_3a_3x3"]
_STEM += ["Conv2d_3b_1x1", "Conv2d_4a_3x3", "MaxPool_5a_3x3"]
_MIXED = ["Mixed_5b", "Mixed_5c", "Mixed_5d", "Mixed_6a", "Mixed_6b", "Mixed_6c", "Mixed_6d"]
_MIXED += ["Mixed_6e", "Mixed_7a", "Mixed_7b", "Mixed_7c"]


def _stem(depth: Callable[[int], int]) -> list:
    """The layers before the first module (VALID unless said)."""
    return [
        conv(depth(32), [3, 3], "Conv2d_1a_3x3", stride=2),
        conv(depth(32), [3, 3], "Conv2d_2a_3x3"),
        conv(depth(64), [3, 3], "Conv2d_2b_3x3", padding="SAME"),
        max_pool([3, 3], "MaxPool_3a_3x3", stride=2),
        conv(depth(80), [1, 1], "Conv2d_3b_1x1"),
        conv(depth(192), [3, 3], "Conv2d_4a_3x3"),
        max_pool([3, 3], "MaxPool_5a_3x3", stride=2),
    ]


def _module(name: str, d: Callable[[int], int]) -> list:
    """The branches of module ``name`` (SAME unless said), with TF's scope names."""
    valid2 = {"stride": 2, "padding": "VALID"}
    if name in ("Mixed_5b", "Mixed_5c", "Mixed_5d"):  # 35x35: 1x1; 5x5; double 3x3; pool
        pool_depth = 32 if name == "Mixed_5b" else 64
        b1 = (
            ["Conv2d_0b_1x1", "Conv_1_0c_5x5"]  # TF's names for this one module
            if name == "Mixed_5c"
            else ["Conv2d_0a_1x1", "Conv2d_0b_5x5"]
        )
        return [
            [conv(d(64), [1, 1], "Conv2d_0a_1x1")],
            [conv(d(48), [1, 1], b1[0]), conv(d(64), [5, 5], b1[1])],
            [
                conv(d(64), [1, 1], "Conv2d_0a_1x1"),
                conv(d(96), [3, 3], "Conv2d_0b_3x3"),
                conv(d(96), [3, 3], "Conv2d_0c_3x3"),
            ],
            [avg_pool([3, 3], "AvgPool_0a_3x3"), conv(d(pool_depth), [1, 1], "Conv2d_0b_1x1")],
        ]
    if name == "Mixed_6a":  # 35x35 to 17x17
        return [
            [conv(d(384), [3, 3], "Conv2d_1a_1x1", **valid2)],
            [
                conv(d(64), [1, 1], "Conv2d_0a_1x1"),
                conv(d(96), [3, 3], "Conv2d_0b_3x3"),
                conv(d(96), [3, 3], "Conv2d_1a_1x1", **valid2),
            ],
            [max_pool([3, 3], "MaxPool_1a_3x3", **valid2)],
        ]
    if name in ("Mixed_6b", "Mixed_6c", "Mixed_6d", "Mixed_6e"):  # 17x17, factorized 7x7
        w = {"Mixed_6b": 128, "Mixed_6c": 160, "Mixed_6d": 160, "Mixed_6e": 192}[name]
        return [
            [conv(d(192), [1, 1], "Conv2d_0a_1x1")],
            [
                conv(d(w), [1, 1], "Conv2d_0a_1x1"),
                conv(d(w), [1, 7], "Conv2d_0b_1x7"),
                conv(d(192), [7, 1], "Conv2d_0c_7x1"),
            ],
            [
                conv(d(w), [1, 1], "Conv2d_0a_1x1"),
                conv(d(w), [7, 1], "Conv2d_0b_7x1"),
                conv(d(w), [1, 7], "Conv2d_0c_1x7"),
                conv(d(w), [7, 1], "Conv2d_0d_7x1"),
                conv(d(192), [1, 7], "Conv2d_0e_1x7"),
            ],
            [avg_pool([3, 3], "AvgPool_0a_3x3"), conv(d(192), [1, 1], "Conv2d_0b_1x1")],
        ]
    if name == "Mixed_7a":  # 17x17 to 8x8
        return [
            [
                conv(d(192), [1, 1], "Conv2d_0a_1x1"),
                conv(d(320), [3, 3], "Conv2d_1a_3x3", **valid2),
            ],
            [
                conv(d(192), [1, 1], "Conv2d_0a_1x1"),
                conv(d(192), [1, 7], "Conv2d_0b_1x7"),
                conv(d(192), [7, 1], "Conv2d_0c_7x1"),
                conv(d(192), [3, 3], "Conv2d_1a_3x3", **valid2),
            ],
            [max_pool([3, 3], "MaxPool_1a_3x3", **valid2)],
        ]
    # Mixed_7b, Mixed_7c: 8x8, the 3x3s split into parallel 1x3 and 3x1
    second_3x1 = "Conv2d_0b_3x1" if name == "Mixed_7b" else "Conv2d_0c_3x1"
    return [
        [conv(d(320), [1, 1], "Conv2d_0a_1x1")],
        [
            conv(d(384), [1, 1], "Conv2d_0a_1x1"),
            fork(conv(d(384), [1, 3], "Conv2d_0b_1x3"), conv(d(384), [3, 1], second_3x1)),
        ],
        [
            conv(d(448), [1, 1], "Conv2d_0a_1x1"),
            conv(d(384), [3, 3], "Conv2d_0b_3x3"),
            fork(conv(d(384), [1, 3], "Conv2d_0c_1x3"), conv(d(384), [3, 1], "Conv2d_0d_3x1")),
        ],
        [avg_pool([3, 3], "AvgPool_0a_3x3"), conv(d(192), [1, 1], "Conv2d_0b_1x1")],
    ]


def inception_v3_base(
    inputs: Any,
    final_endpoint: str = "Mixed_7c",
    min_depth: int = 16,
    depth_multiplier: float = 1.0,
    scope: Any = None,
) -> tuple:
    """Inception v3 from ``inputs`` up to ``final_endpoint`` (``Conv2d_1a_3x3``,
    ``Conv2d_2a_3x3``, ``Conv2d_2b_3x3``, ``MaxPool_3a_3x3``, ``Conv2d_3b_1x1``,
    ``Conv2d_4a_3x3``, ``MaxPool_5a_3x3``, ``Mixed_5b`` ... ``Mixed_5d``, ``Mixed_6a`` ...
    ``Mixed_6e``, ``Mixed_7a`` ... ``Mixed_7c``); returns that tensor and the end points so
    far. Raises ValueError for an unknown ``final_endpoint`` or a ``depth_multiplier`` not
    above zero."""
    depth = _depth_fn(min_depth, depth_multiplier)
    end_points: dict = {}
    with _hb.variable_scope(scope, "InceptionV3", [inputs]):
        net = inputs
        ops = [conv2d, max_pool2d, avg_pool2d]
        with arg_scope(ops, stride=1, padding="VALID"):
            for name, layer in zip(_STEM, _stem(depth)):
                net = layer(net)
                end_points[name] = net
                if name == final_endpoint:
                    return net, end_points
        with arg_scope(ops, stride=1, padding="SAME"):
            for name in _MIXED:
                net = mixed(net, name, _module(name, depth))
                end_points[name] = net
                if name == final_endpoint:
                    return net, end_points
    raise ValueError(f"Unknown final endpoint {final_endpoint}")


def inception_v3(
    inputs: Any,
    num_classes: int = 1000,
    is_training: Any = True,
    dropout_keep_prob: float = 0.8,
    min_depth: int = 16,
    depth_multiplier: float = 1.0,
    prediction_fn: Callable = softmax,
    spatial_squeeze: bool = True,
    reuse: Any = None,
    scope: Any = "InceptionV3",
    create_aux_logits: bool = True,
) -> tuple:
    """Inception v3 of ``inputs`` [batch, 299, 299, 3] (smaller inputs shrink the average
    pools): the base, the auxiliary head on ``Mixed_6e`` (``AuxLogits``, with
    ``create_aux_logits``), then an average pool, dropout (``PreLogits``) and a 1x1
    convolution to ``num_classes``; returns the logits and the end points with ``AuxLogits``,
    ``PreLogits``, ``Logits`` and ``Predictions``. (``create_aux_logits``, which TF1's contrib
    did not have, comes after ``scope`` so that TF1's positional calls keep their meaning.)"""
    depth = _depth_fn(min_depth, depth_multiplier)
    with _hb.variable_scope(scope, "InceptionV3", [inputs, num_classes], reuse=reuse) as sc:
        with arg_scope([batch_norm, dropout], is_training=is_training):
            net, end_points = inception_v3_base(
                inputs, scope=sc, min_depth=min_depth, depth_multiplier=depth_multiplier
            )
            if create_aux_logits and num_classes:
                with arg_scope([conv2d, max_pool2d, avg_pool2d], stride=1, padding="SAME"):
                    with _hb.variable_scope("AuxLogits"):
                        aux = avg_pool2d(
                            end_points["Mixed_6e"],
                            [5, 5],
                            stride=3,
                            padding="VALID",
                            scope="AvgPool_1a_5x5",
                        )
                        aux = conv2d(aux, depth(128), [1, 1], scope="Conv2d_1b_1x1")
                        kernel = reduced_kernel(aux, [5, 5])
                        aux = conv2d(
                            aux,
                            depth(768),
                            kernel,
                            weights_initializer=trunc_normal(0.01),
                            padding="VALID",
                            scope="Conv2d_2a_{}x{}".format(*kernel),
                        )
                        aux = conv2d(
                            aux,
                            num_classes,
                            [1, 1],
                            activation_fn=None,
                            normalizer_fn=None,
                            weights_initializer=trunc_normal(0.001),
                            scope="Conv2d_2b_1x1",
                        )
                        if spatial_squeeze:
                            aux = _hb.squeeze(aux, [1, 2], name="SpatialSqueeze")
                        end_points["AuxLogits"] = aux
            with _hb.variable_scope("Logits"):
                kernel = reduced_kernel(net, [8, 8])
                net = avg_pool2d(
                    net, kernel, padding="VALID", scope="AvgPool_1a_{}x{}".format(*kernel)
                )
                net = dropout(net, keep_prob=dropout_keep_prob, scope="Dropout_1b")
                end_points["PreLogits"] = net
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


inception_v3.default_image_size = 299  # type: ignore[attr-defined]


def inception_v3_arg_scope(
    weight_decay: float = 0.00004,
    batch_norm_var_collection: str = "moving_vars",
    batch_norm_decay: float = 0.9997,
    batch_norm_epsilon: float = 0.001,
    updates_collections: Any = _hb.GraphKeys.UPDATE_OPS,
    use_fused_batchnorm: bool = True,
) -> dict:
    """L2 weight decay for convolutions and fully connected layers; convolutions with He
    initialization, ReLU and batch norm (``batch_norm_decay``, ``batch_norm_epsilon``, the
    moving statistics also in ``batch_norm_var_collection``)."""
    params = batch_norm_params(
        batch_norm_decay,
        batch_norm_epsilon,
        updates_collections,
        batch_norm_var_collection,
        fused=use_fused_batchnorm,
    )
    with arg_scope([conv2d, fully_connected], weights_regularizer=l2_regularizer(weight_decay)):
        with arg_scope(
            [conv2d],
            weights_initializer=variance_scaling_initializer(),
            activation_fn=_hb.nn.relu,
            normalizer_fn=batch_norm,
            normalizer_params=params,
        ) as sc:
            return sc
