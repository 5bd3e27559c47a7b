"""``tensorflow.python.framework``: ``ops``, ``dtypes``, ``constant_op``, ``tensor_shape``
and ``tensor_util``."""

from . import constant_op, dtypes, ops, tensor_shape, tensor_util  # noqa: F401
