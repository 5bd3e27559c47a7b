"""``tensorflow.python.ops.random_ops``: each name a TF1 program takes from it is ``tf.<name>``."""

from .._forward import forward

__getattr__ = forward(__name__)
