"""``slim.nets.resnet_v2``: the pre-activation ResNet (He et al. 2016), 50, 101, 152 and 200
layers, with TF's variable and end point names
(``resnet_v2_50/block1/unit_1/bottleneck_v2/preact/gamma``), built inside
``resnet_arg_scope()`` for TF's batch norm and initialization. Each unit starts with a batch
norm and ReLU (``preact``); the root convolution has neither and a batch norm (``postnorm``)
follows the last block."""

from __future__ import annotations

from typing import Any

import hetbed as _hb

from . import resnet_utils
from ._common import add_arg_scope, batch_norm, collect_named_outputs, conv2d, last_dimension
from .resnet_utils import _block, _resnet, _standard_blocks

__all__ = [
    "bottleneck",
    "resnet_arg_scope",
    "resnet_v2",
    "resnet_v2_101",
    "resnet_v2_152",
    "resnet_v2_200",
    "resnet_v2_50",
    "resnet_v2_block",
]

resnet_arg_scope = resnet_utils.resnet_arg_scope


@add_arg_scope
def bottleneck(
    inputs: Any,
    depth: int,
    depth_bottleneck: int,
    stride: int,
    rate: int = 1,
    outputs_collections: Any = None,
    scope: Any = None,
) -> Any:
    """``shortcut + conv3(conv2(conv1(preact)))`` with ``preact = relu(batch_norm(inputs))``:
    1x1 to ``depth_bottleneck``, 3x3 of stride ``stride`` (dilated by ``rate``), 1x1 to
    ``depth`` without normalization or activation; the shortcut is ``inputs`` subsampled when
    it has ``depth`` channels, else a 1x1 strided projection of ``preact``."""
    with _hb.variable_scope(scope, "bottleneck_v2", [inputs]) as sc:
        depth_in = last_dimension(inputs.get_shape(), min_rank=4)
        preact = batch_norm(inputs, activation_fn=_hb.nn.relu, scope="preact")
        if depth == depth_in:
            shortcut = resnet_utils.subsample(inputs, stride, "shortcut")
        else:
            shortcut = conv2d(
                preact,
                depth,
                [1, 1],
                stride=stride,
                normalizer_fn=None,
                activation_fn=None,
                scope="shortcut",
            )
        residual = conv2d(preact, depth_bottleneck, [1, 1], stride=1, scope="conv1")
        residual = resnet_utils.conv2d_same(
            residual, depth_bottleneck, 3, stride, rate=rate, scope="conv2"
        )
        residual = conv2d(
            residual,
            depth,
            [1, 1],
            stride=1,
            normalizer_fn=None,
            activation_fn=None,
            scope="conv3",
        )
        return collect_named_outputs(outputs_collections, sc.name, shortcut + residual)


def resnet_v2(
    inputs: Any,
    blocks: list,
    num_classes: int | None = None,
    is_training: Any = True,
    global_pool: bool = True,
    output_stride: int | None = None,
    include_root_block: bool = True,
    reuse: Any = None,
    scope: Any = None,
) -> tuple:
    """A v2 (pre-activation) ResNet of ``blocks`` (``resnet_utils.Block``s); returns ``(net, end_points)``.

    ``net`` is the logits ([batch, 1, 1, num_classes] with ``global_pool``) or, with
    ``num_classes`` None, the last block's output (globally averaged with ``global_pool``).
    ``output_stride`` (a multiple of 4 with the root block) keeps the features that much
    smaller than the input by atrous convolution; ``is_training`` sets the batch norms' mode.
    """
    return _resnet(
        2,
        bottleneck,
        inputs,
        blocks,
        num_classes,
        is_training,
        global_pool,
        output_stride,
        include_root_block,
        reuse,
        scope,
    )


resnet_v2.default_image_size = 224  # type: ignore[attr-defined]


def resnet_v2_block(scope: str, base_depth: int, num_units: int, stride: int) -> Any:
    """A block of ``num_units`` v2 bottleneck units (depth ``4 * base_depth``, bottleneck
    ``base_depth``), the last of stride ``stride``."""
    return _block(bottleneck, scope, base_depth, num_units, stride)


def _sized(size: int) -> Any:
    def net(
        inputs: Any,
        num_classes: int | None = None,
        is_training: Any = True,
        global_pool: bool = True,
        output_stride: int | None = None,
        reuse: Any = None,
        scope: Any = f"resnet_v2_{size}",
    ) -> tuple:
        blocks = _standard_blocks(resnet_v2_block, size)
        return resnet_v2(
            inputs,
            blocks,
            num_classes,
            is_training,
            global_pool,
            output_stride,
            include_root_block=True,
            reuse=reuse,
            scope=scope,
        )

    net.__name__ = net.__qualname__ = f"resnet_v2_{size}"
    net.__doc__ = f"ResNet-{size} v2; see ``resnet_v2`` for the arguments and the result."
    net.default_image_size = 224  # type: ignore[attr-defined]
    return net


resnet_v2_50 = _sized(50)
resnet_v2_101 = _sized(101)
resnet_v2_152 = _sized(152)
resnet_v2_200 = _sized(200)
