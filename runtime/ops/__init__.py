"""Op modules. Importing this package registers every op."""

from . import (  # noqa: F401
    array,
    collective,
    cond,
    control,
    conv_transpose,
    data_flow,
    debug,  # WP4
    dynamic,
    iterator,
    loop,
    manip,
    math,
    nn,
    py_func,  # WP4
    random,
    sampled,
    state,
    summary,
    transfer,
)
