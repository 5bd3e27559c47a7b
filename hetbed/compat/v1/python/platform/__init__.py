"""``tensorflow.python.platform``: ``gfile`` and ``tf_logging``."""

from . import gfile, tf_logging  # noqa: F401
