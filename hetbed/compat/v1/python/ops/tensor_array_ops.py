"""``tensorflow.python.ops.tensor_array_ops``: ``TensorArray`` (``tf.TensorArray``)."""

from .._forward import forward

__getattr__ = forward(__name__)
