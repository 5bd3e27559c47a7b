"""``tensorflow.python.framework.graph_io``: ``write_graph``."""

from hetbed.train import write_graph  # noqa: F401
