"""``slim.nets.resnet_v1``: ResNet v1 (He et al. 2015), 50, 101, 152 and 200 layers, with TF's
variable and end point names (``resnet_v1_50/block1/unit_1/bottleneck_v1/conv1/weights``),
built inside ``resnet_arg_scope()`` for TF's batch norm and initialization. The bottleneck
units normalize after each convolution; the block's stride is in its last unit."""

from __future__ import annotations

from typing import Any

import hetbed as _hb

from . import resnet_utils
from ._common import add_arg_scope, collect_named_outputs, conv2d, last_dimension
from .resnet_utils import _block, _resnet, _standard_blocks

__all__ = [
    "bottleneck",
    "resnet_arg_scope",
    "resnet_v1",
    "resnet_v1_101",
    "resnet_v1_152",
    "resnet_v1_200",
    "resnet_v1_50",
    "resnet_v1_block",
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
    """``relu(shortcut + conv3(conv2(conv1(inputs))))``: 1x1 to ``depth_bottleneck``, 3x3 of
    stride ``stride`` (dilated by ``rate``), 1x1 to ``depth`` without activation; the shortcut
    is ``inputs`` subsampled when it has ``depth`` channels, else a 1x1 strided projection."""
    with _hb.variable_scope(scope, "bottleneck_v1", [inputs]) as sc:
        depth_in = last_dimension(inputs.get_shape(), min_rank=4)
        if depth == depth_in:
            shortcut = resnet_utils.subsample(inputs, stride, "shortcut")
        else:
            shortcut = conv2d(
                inputs, depth, [1, 1], stride=stride, activation_fn=None, scope="shortcut"
            )
        residual = conv2d(inputs, depth_bottleneck, [1, 1], stride=1, scope="conv1")
        residual = resnet_utils.conv2d_same(
            residual, depth_bottleneck, 3, stride, rate=rate, scope="conv2"
        )
        residual = conv2d(residual, depth, [1, 1], stride=1, activation_fn=None, scope="conv3")
        out = _hb.nn.relu(shortcut + residual)
        return collect_named_outputs(outputs_collections, sc.name, out)


def resnet_v1(
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
    """A v1 ResNet of ``blocks`` (``resnet_utils.Block``s); returns ``(net, end_points)``.

    ``net`` is the logits ([batch, 1, 1, num_classes] with ``global_pool``) or, with
    ``num_classes`` None, the last block's output (globally averaged with ``global_pool``).
    ``output_stride`` (a multiple of 4 with the root block) keeps the features that much
    smaller than the input by atrous convolution; ``is_training`` sets the batch norms' mode.
    """
    return _resnet(
        1,
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


resnet_v1.default_image_size = 224  # type: ignore[attr-defined]


def resnet_v1_block(scope: str, base_depth: int, num_units: int, stride: int) -> Any:
    """A block of ``num_units`` v1 bottleneck units (depth ``4 * base_depth``, bottleneck
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
        scope: Any = f"resnet_v1_{size}",
    ) -> tuple:
        blocks = _standard_blocks(resnet_v1_block, size)
        return resnet_v1(
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

    net.__name__ = net.__qualname__ = f"resnet_v1_{size}"
    net.__doc__ = f"ResNet-{size} v1; see ``resnet_v1`` for the arguments and the result."
    net.default_image_size = 224  # type: ignore[attr-defined]
    return net


resnet_v1_50 = _sized(50)
resnet_v1_101 = _sized(101)
resnet_v1_152 = _sized(152)
resnet_v1_200 = _sized(200)
