"""Op modules. Importing this package registers every op."""

from . import (  # noqa: F401
    array,
    collective,
    cond,
    control,
    conv_transpose,
    data_flow,
    dynamic,
    iterator,
    loop,
    manip,
    math,
    nn,
    random,
    sampled,
    state,
    summary,
    transfer,
)
# WP2: indexing, scatter, segments, sets, shape ops
from . import scatter, segments, shape_ops  # noqa: E402, F401
