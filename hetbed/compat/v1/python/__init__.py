"""The part of TensorFlow's private ``tensorflow.python`` that TF1 programs import directly:
``from tensorflow.python.framework import ops`` (for ``ops.reset_default_graph()`` and friends)
becomes ``from hetbed.compat.v1.python.framework import ops``; ``tensorflow.python.client``'s
``device_lib`` likewise."""

from . import client, framework  # noqa: F401
