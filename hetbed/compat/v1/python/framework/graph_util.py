"""``tensorflow.python.framework.graph_util`` (= ``tf.graph_util``)."""

from hetbed.graph_util import (  # noqa: F401
    convert_variables_to_constants,
    extract_sub_graph,
    remove_training_nodes,
)
