"""``tensorflow.python.framework.constant_op``."""

from hetbed import constant  # noqa: F401
