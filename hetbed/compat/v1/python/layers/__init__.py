"""``tensorflow.python.layers``: ``utils`` (``smart_cond``)."""

from . import utils  # noqa: F401
