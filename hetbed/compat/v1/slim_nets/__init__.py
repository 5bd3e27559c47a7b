"""``tf.contrib.slim.nets``: TF-Slim's image classification nets, as TF1's contrib had them:
``alexnet`` (``alexnet_v2``), ``overfeat``, ``vgg`` (``vgg_a``, ``vgg_16``, ``vgg_19``),
``inception`` (v1, v2, v3 with their ``_base`` and ``_arg_scope`` functions), ``resnet_v1`` and
``resnet_v2`` (50, 101, 152, 200 layers) and ``resnet_utils``. Built from the slim layers of
contrib_layers.py with TF's argument lists, end point names and variable names, so that a
checkpoint of TF's nets restores into them by name. Importable as
``hetbed.compat.v1.contrib.slim.nets`` and ``...contrib.slim.python.slim.nets``."""

from . import (
    alexnet,
    inception,
    inception_v1,
    inception_v2,
    inception_v3,
    overfeat,
    resnet_utils,
    resnet_v1,
    resnet_v2,
    vgg,
)

__all__ = [
    "alexnet",
    "inception",
    "inception_v1",
    "inception_v2",
    "inception_v3",
    "overfeat",
    "resnet_utils",
    "resnet_v1",
    "resnet_v2",
    "vgg",
]
