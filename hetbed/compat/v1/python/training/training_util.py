"""``tensorflow.python.training.training_util``."""

from .._forward import forward

__getattr__ = forward(__name__)
