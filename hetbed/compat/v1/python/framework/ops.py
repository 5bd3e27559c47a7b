"""``tensorflow.python.framework.ops``: the graph names TF1 programs take from it."""

from hetbed import (  # noqa: F401
    Graph,
    GraphKeys,
    IndexedSlices,
    Operation,
    Tensor,
    add_to_collection,
    colocate_with,
    control_dependencies,
    device,
    get_collection,
    get_collection_ref,
    get_default_graph,
    name_scope,
    reset_default_graph,
)
from hetbed.runtime.registry import convert_to_tensor  # noqa: F401
