"""``slim.nets.resnet_utils``: what ResNet v1 and v2 are made of. ``Block`` names a block's
scope, its unit function and one argument set per unit; ``stack_blocks_dense`` runs the blocks in
scopes ``<block>/unit_<i>`` and, given ``output_stride``, stops striding once that stride is
reached and dilates the later 3x3 convolutions instead (atrous convolution), so that the output
is ``output_stride`` times smaller than the input and the variables are the same.
``conv2d_same`` is a strided convolution that pads the way stride 1 with SAME would, whatever
the input's parity."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import hetbed as _hb

from ._common import (
    add_arg_scope,
    arg_scope,
    batch_norm,
    collect_named_outputs,
    conv2d,
    convert_collection_to_dict,
    l2_regularizer,
    max_pool2d,
    softmax,
    variance_scaling_initializer,
)

__all__ = ["Block", "conv2d_same", "resnet_arg_scope", "stack_blocks_dense", "subsample"]


class Block(namedtuple("Block", ["scope", "unit_fn", "args"])):
    """A ResNet block: its ``scope`` name, ``unit_fn`` (a residual unit such as
    ``resnet_v1.bottleneck``) and ``args``, one entry per unit: a dict of ``unit_fn``'s keyword
    arguments (``depth``, ``depth_bottleneck``, ``stride``) or, as older TF had them, a
    ``(depth, depth_bottleneck, stride)`` tuple."""


def subsample(inputs: Any, factor: int, scope: Any = None) -> Any:
    """``inputs`` itself for ``factor`` 1, else every ``factor``-th row and column (a 1x1 max
    pool of stride ``factor``)."""
    if factor == 1:
        return inputs
    return max_pool2d(inputs, [1, 1], stride=factor, scope=scope)


def conv2d_same(
    inputs: Any, num_outputs: int, kernel_size: int, stride: int, rate: int = 1, scope: Any = None
) -> Any:
    """A ``kernel_size`` convolution of stride ``stride`` equal to a SAME convolution of stride
    1 subsampled by ``stride``: for ``stride`` > 1 the input is zero-padded by the dilated
    kernel's extent (the odd one at the end) and convolved VALID."""
    if stride == 1:
        return conv2d(
            inputs, num_outputs, kernel_size, stride=1, rate=rate, padding="SAME", scope=scope
        )
    extent = kernel_size + (kernel_size - 1) * (rate - 1)
    before = (extent - 1) // 2
    after = extent - 1 - before
    padded = _hb.pad(inputs, [[0, 0], [before, after], [before, after], [0, 0]])
    return conv2d(
        padded, num_outputs, kernel_size, stride=stride, rate=rate, padding="VALID", scope=scope
    )


def _unit_kwargs(unit: Any) -> dict:
    if isinstance(unit, dict):
        return dict(unit)
    depth, depth_bottleneck, stride = unit
    return {"depth": depth, "depth_bottleneck": depth_bottleneck, "stride": stride}


@add_arg_scope
def stack_blocks_dense(
    net: Any, blocks: list, output_stride: Any = None, outputs_collections: Any = None
) -> Any:
    """``net`` through every unit of every block (scopes ``<block.scope>/unit_<i>``), each
    block's output collected under the block's scope name. With ``output_stride`` (a product of
    the units' strides from the start), units past that stride run with stride 1 and their
    rate multiplied by the strides skipped; raises ValueError when ``output_stride`` cannot be
    reached."""
    stride_so_far = 1
    rate = 1
    for block in blocks:
        with _hb.variable_scope(block.scope, "block", [net]) as sc:
            for i, unit in enumerate(block.args):
                if output_stride is not None and stride_so_far > output_stride:
                    raise ValueError("The target output_stride cannot be reached.")
                kwargs = _unit_kwargs(unit)
                unit_stride = kwargs.get("stride", 1)
                with _hb.variable_scope(f"unit_{i + 1}", values=[net]):
                    if output_stride is not None and stride_so_far == output_stride:
                        net = block.unit_fn(net, rate=rate, **{**kwargs, "stride": 1})
                        rate *= unit_stride
                    else:
                        net = block.unit_fn(net, rate=1, **kwargs)
                        stride_so_far *= unit_stride
            net = collect_named_outputs(outputs_collections, sc.name, net)
    if output_stride is not None and stride_so_far != output_stride:
        raise ValueError("The target output_stride cannot be reached.")
    return net


def resnet_arg_scope(
    weight_decay: float = 0.0001,
    batch_norm_decay: float = 0.997,
    batch_norm_epsilon: float = 1e-5,
    batch_norm_scale: bool = True,
) -> dict:
    """The ResNets' arg scope: convolutions with L2 weight decay, He initialization, batch norm
    (``batch_norm_decay``, ``batch_norm_epsilon``, a ``gamma`` with ``batch_norm_scale``) and
    ReLU; max pools SAME."""
    bn = {
        "decay": batch_norm_decay,
        "epsilon": batch_norm_epsilon,
        "scale": batch_norm_scale,
        "updates_collections": _hb.GraphKeys.UPDATE_OPS,
    }
    with arg_scope(
        [conv2d],
        weights_regularizer=l2_regularizer(weight_decay),
        weights_initializer=variance_scaling_initializer(),
        activation_fn=_hb.nn.relu,
        normalizer_fn=batch_norm,
        normalizer_params=bn,
    ):
        with arg_scope([batch_norm], **bn):
            with arg_scope([max_pool2d], padding="SAME") as sc:
                return sc


# ---- what resnet_v1 and resnet_v2 share ------------------------------------------------------

_SIZES = {  # units per block of the four depths (base depths 64, 128, 256, 512; strides 2, 2, 2, 1)
    50: (3, 4, 6, 3),
    101: (3, 4, 23, 3),
    152: (3, 8, 36, 3),
    200: (3, 24, 36, 3),
}


def _block(unit_fn: Any, scope: str, base_depth: int, num_units: int, stride: int) -> Block:
    """A block of ``num_units`` bottleneck units of output depth ``4 * base_depth``, the last of
    stride ``stride``."""
    unit = {"depth": base_depth * 4, "depth_bottleneck": base_depth}
    return Block(
        scope, unit_fn, [{**unit, "stride": 1}] * (num_units - 1) + [{**unit, "stride": stride}]
    )


def _standard_blocks(make_block: Any, size: int) -> list:
    units = _SIZES[size]
    return [
        make_block(f"block{i + 1}", base_depth=64 * 2**i, num_units=n, stride=2 if i < 3 else 1)
        for i, n in enumerate(units)
    ]


def _resnet(
    version: int,
    unit_fn: Any,
    inputs: Any,
    blocks: list,
    num_classes: Any,
    is_training: Any,
    global_pool: bool,
    output_stride: Any,
    include_root_block: bool,
    reuse: Any,
    scope: Any,
) -> tuple:
    """The ResNet around ``blocks``: the 7x7 stride-2 root convolution and 3x3 max pool, the
    blocks, v2's final batch norm (``postnorm``), the global average (``pool5``), the 1x1
    ``logits`` convolution and ``predictions``; end points named by scope as TF's."""
    with _hb.variable_scope(scope, f"resnet_v{version}", [inputs], reuse=reuse) as sc:
        collection = sc.original_name_scope + "_end_points"
        with (
            arg_scope([conv2d, unit_fn, stack_blocks_dense], outputs_collections=collection),
            arg_scope([batch_norm], is_training=is_training),
        ):
            net = inputs
            if include_root_block:
                if output_stride is not None:
                    if output_stride % 4 != 0:
                        raise ValueError("The output_stride needs to be a multiple of 4.")
                    output_stride /= 4
                if version == 1:
                    net = conv2d_same(net, 64, 7, stride=2, scope="conv1")
                else:  # the first unit normalizes and activates
                    with arg_scope([conv2d], activation_fn=None, normalizer_fn=None):
                        net = conv2d_same(net, 64, 7, stride=2, scope="conv1")
                net = max_pool2d(net, [3, 3], stride=2, scope="pool1")
            net = stack_blocks_dense(net, blocks, output_stride)
            if version == 2:
                net = batch_norm(net, activation_fn=_hb.nn.relu, scope="postnorm")
            if global_pool:
                net = _hb.reduce_mean(net, [1, 2], name="pool5", keepdims=True)
            if num_classes is not None:
                net = conv2d(
                    net, num_classes, [1, 1], activation_fn=None, normalizer_fn=None, scope="logits"
                )
            end_points = convert_collection_to_dict(collection)
            if num_classes is not None:
                end_points["predictions"] = softmax(net, scope="predictions")
            return net, end_points
