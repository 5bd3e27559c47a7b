"""``tensorflow.python.ops.lookup_ops``: TF1's lookup tables (``tf.contrib.lookup``'s names:
``index_table_from_file``, ``HashTable``, ...), then ``tf.<name>``."""

from .._forward import forward


def _tables() -> dict:
    import hetbed.compat.v1 as tf

    return {
        k: getattr(tf.contrib.lookup, k) for k in dir(tf.contrib.lookup) if not k.startswith("_")
    }


def __getattr__(name: str):  # noqa: ANN202
    return forward(__name__, _tables())(name)
