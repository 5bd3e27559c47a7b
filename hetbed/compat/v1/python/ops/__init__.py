"""``tensorflow.python.ops``: modules whose names are TF1's public ones (see ``_forward``)."""

from . import (  # noqa: F401
    array_ops,
    control_flow_ops,
    init_ops,
    lookup_ops,
    math_ops,
    nn,
    nn_ops,
    random_ops,
    state_ops,
    tensor_array_ops,
    variable_scope,
    variables,
)
