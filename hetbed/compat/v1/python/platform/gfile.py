"""``tensorflow.python.platform.gfile``: hetbed.compat.v1's ``gfile``."""

from hetbed.compat.v1.gfile import *  # noqa: F401,F403
