"""``tensorflow.python.client``: ``device_lib``."""

from . import device_lib  # noqa: F401
