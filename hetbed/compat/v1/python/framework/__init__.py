"""``tensorflow.python.framework``: ``ops``, ``dtypes`` and ``constant_op``."""

from . import constant_op, dtypes, ops  # noqa: F401
