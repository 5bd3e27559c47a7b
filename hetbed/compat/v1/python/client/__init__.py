"""``tensorflow.python.client``: ``device_lib``, ``timeline``."""

from . import device_lib, timeline  # noqa: F401
