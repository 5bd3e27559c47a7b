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
    nn_extra,
    random,
    sampled,
    state,
    summary,
    transfer,
)
