"""``tensorflow.python.framework``: ``ops`` and ``dtypes``."""

from . import dtypes, ops  # noqa: F401
