"""``tensorflow.python.platform.tf_logging``: each name is ``tf.logging.<name>``."""

from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    import hetbed.compat.v1 as tf

    return getattr(tf.logging, name)
