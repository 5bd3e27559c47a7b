"""``tensorflow.python.framework.importer``: ``import_graph_def``."""

from hetbed.runtime.graph_import import import_graph_def  # noqa: F401
