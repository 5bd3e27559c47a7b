"""``tensorflow.python.framework``: ``ops``, ``dtypes``, ``constant_op``, ``tensor_shape``,
``tensor_util``, ``graph_util``, ``graph_io`` and ``importer``."""

from . import (  # noqa: F401
    constant_op,
    dtypes,
    graph_io,
    graph_util,
    importer,
    ops,
    tensor_shape,
    tensor_util,
)
