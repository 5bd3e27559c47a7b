"""``tensorflow.python.training``: ``optimizer`` (the base class custom optimizers subclass)
and ``training_util``."""

from . import optimizer, training_util  # noqa: F401
