"""The part of TensorFlow's private ``tensorflow.python`` that TF1 programs import directly:
``from tensorflow.python.framework import ops`` (for ``ops.reset_default_graph()`` and friends)
becomes ``from hetbed.compat.v1.python.framework import ops``; ``tensorflow.python.client``'s
``device_lib``, ``ops`` (``state_ops``, ``math_ops``, ``control_flow_ops``, ...: TF1's
public names), ``training.optimizer`` (the base class custom optimizers subclass),
``platform.gfile``, ``saved_model`` and ``layers.utils`` (``smart_cond``) likewise."""

from . import client, framework, layers, ops, platform, saved_model, training  # noqa: F401
