"""``slim.nets.inception_v1``: GoogLeNet (Szegedy et al. 2014) as TF-Slim builds it, with TF's
variable and end point names (``InceptionV1/Mixed_3b/Branch_1/Conv2d_0b_3x3/weights``,
end points ``Conv2d_1a_7x7`` ... ``Mixed_5c``, ``Logits``, ``Predictions``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hetbed as _hb

from ._common import (
    arg_scope,
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
    softmax,
    trunc_normal,
    variance_scaling_initializer,
)

__all__ = ["inception_v1", "inception_v1_arg_scope", "inception_v1_base"]

# the Inception modules: 1x1; 1x1 then 3x3; 1x1 then 3x3; 3x3 max pool then 1x1
_MODULES = {
    "Mixed_3b": (64, 96, 128, 16, 32, 32),
    "Mixed_3c": (128, 128, 192, 32, 96, 64),
    "Mixed_4b": (192, 96, 208, 16, 48, 64),
    "Mixed_4c": (160, 112, 224, 24, 64, 64),
    "Mixed_4d": (128, 128, 256, 24, 64, 64),
    "Mixed_4e": (112, 144, 288, 32, 64, 64),
    "Mixed_4f": (256, 160, 320, 32, 128, 128),
    "Mixed_5b": (256, 160, 320, 32, 128, 128),
    "Mixed_5c": (384, 192, 384, 48, 128, 128),
}


def _module(name: str) -> Callable[[Any], Any]:
    b0, b1a, b1b, b2a, b2b, b3 = _MODULES[name]
    # TF's checkpoints name Mixed_5b's second 3x3 "Conv2d_0a_3x3"
    third = "Conv2d_0a_3x3" if name == "Mixed_5b" else "Conv2d_0b_3x3"
    branches = [
        [conv(b0, [1, 1], "Conv2d_0a_1x1")],
        [conv(b1a, [1, 1], "Conv2d_0a_1x1"), conv(b1b, [3, 3], "Conv2d_0b_3x3")],
        [conv(b2a, [1, 1], "Conv2d_0a_1x1"), conv(b2b, [3, 3], third)],
        [max_pool([3, 3], "MaxPool_0a_3x3"), conv(b3, [1, 1], "Conv2d_0b_1x1")],
    ]
    return lambda net: mixed(net, name, branches)


def _layers() -> list[tuple[str, Callable[[Any], Any]]]:
    stem = [
        ("Conv2d_1a_7x7", conv(64, [7, 7], "Conv2d_1a_7x7", stride=2)),
        ("MaxPool_2a_3x3", max_pool([3, 3], "MaxPool_2a_3x3", stride=2)),
        ("Conv2d_2b_1x1", conv(64, [1, 1], "Conv2d_2b_1x1")),
        ("Conv2d_2c_3x3", conv(192, [3, 3], "Conv2d_2c_3x3")),
        ("MaxPool_3a_3x3", max_pool([3, 3], "MaxPool_3a_3x3", stride=2)),
    ]
    pools = {
        "Mixed_4b": ("MaxPool_4a_3x3", [3, 3]),
        "Mixed_5b": ("MaxPool_5a_2x2", [2, 2]),
    }
    out = list(stem)
    for name in _MODULES:
        if name in pools:
            pool, kernel = pools[name]
            out.append((pool, max_pool(kernel, pool, stride=2)))
        out.append((name, _module(name)))
    return out


def inception_v1_base(
    inputs: Any, final_endpoint: str = "Mixed_5c", scope: Any = "InceptionV1"
) -> tuple:
    """Inception v1 from ``inputs`` up to ``final_endpoint`` (one of ``Conv2d_1a_7x7``,
    ``MaxPool_2a_3x3``, ``Conv2d_2b_1x1``, ``Conv2d_2c_3x3``, ``MaxPool_3a_3x3``,
    ``Mixed_3b``, ``Mixed_3c``, ``MaxPool_4a_3x3``, ``Mixed_4b`` ... ``Mixed_4f``,
    ``MaxPool_5a_2x2``, ``Mixed_5b``, ``Mixed_5c``); returns that tensor and the dict of end
    points so far. Raises ValueError for an unknown ``final_endpoint``."""
    end_points: dict = {}
    with _hb.variable_scope(scope, "InceptionV1", [inputs]):
        with arg_scope([conv2d, fully_connected], weights_initializer=trunc_normal(0.01)):
            with arg_scope([conv2d, max_pool2d], stride=1, padding="SAME"):
                net = inputs
                for name, layer in _layers():
                    net = layer(net)
                    end_points[name] = net
                    if name == final_endpoint:
                        return net, end_points
    raise ValueError(f"Unknown final endpoint {final_endpoint}")


def inception_v1(
    inputs: Any,
    num_classes: int = 1000,
    is_training: Any = True,
    dropout_keep_prob: float = 0.8,
    prediction_fn: Callable = softmax,
    spatial_squeeze: bool = True,
    reuse: Any = None,
    scope: Any = "InceptionV1",
) -> tuple:
    """Inception v1 of ``inputs`` [batch, 224, 224, 3]: the base, a 7x7 average pool, dropout
    and a 1x1 convolution to ``num_classes`` (scope ``Logits``); returns the logits (squeezed
    to [batch, num_classes] with ``spatial_squeeze``) and the end points with ``Logits`` and
    ``Predictions`` (``prediction_fn`` of the logits)."""
    with _hb.variable_scope(scope, "InceptionV1", [inputs, num_classes], reuse=reuse) as sc:
        with arg_scope([batch_norm, dropout], is_training=is_training):
            net, end_points = inception_v1_base(inputs, scope=sc)
            with _hb.variable_scope("Logits"):
                net = avg_pool2d(net, [7, 7], stride=1, scope="MaxPool_0a_7x7")
                net = dropout(net, dropout_keep_prob, scope="Dropout_0b")
                logits = conv2d(
                    net,
                    num_classes,
                    [1, 1],
                    activation_fn=None,
                    normalizer_fn=None,
                    scope="Conv2d_0c_1x1",
                )
                if spatial_squeeze:
                    logits = _hb.squeeze(logits, [1, 2], name="SpatialSqueeze")
                end_points["Logits"] = logits
                end_points["Predictions"] = prediction_fn(logits, scope="Predictions")
    return logits, end_points


inception_v1.default_image_size = 224  # type: ignore[attr-defined]


def inception_v1_arg_scope(
    weight_decay: float = 0.00004,
    use_batch_norm: bool = True,
    batch_norm_var_collection: str = "moving_vars",
) -> dict:
    """L2 weight decay for convolutions and fully connected layers; convolutions with He
    initialization, ReLU and (``use_batch_norm``) batch norm of decay 0.9997, epsilon 0.001,
    the moving statistics also in ``batch_norm_var_collection``."""
    params = batch_norm_params(0.9997, 0.001, _hb.GraphKeys.UPDATE_OPS, batch_norm_var_collection)
    with arg_scope([conv2d, fully_connected], weights_regularizer=l2_regularizer(weight_decay)):
        with arg_scope(
            [conv2d],
            weights_initializer=variance_scaling_initializer(),
            activation_fn=_hb.nn.relu,
            normalizer_fn=batch_norm if use_batch_norm else None,
            normalizer_params=params if use_batch_norm else {},
        ) as sc:
            return sc
